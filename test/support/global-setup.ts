import postgres from 'postgres';
import { migrate } from '../../db/migrate';
import { TEMPLATE_DATABASE, testEnv } from './env';
import { resetSharedSlides } from './shared-slides';
import { ensureWorkflowBundle } from './workflow-bundle';

/**
 * Once per run: a migrated template database that each test file clones, and one workflow
 * bundle that every test worker loads (the shared slides are ingested later, by the first file
 * that needs them). Skipped when run without services (unit tests only).
 */
export default async function globalSetup(): Promise<void> {
  // `npx jest test/unit/...` needs no services; integration files then fail at testEnv().
  if (!process.env.TEST_DATABASE_URL) return;
  const env = testEnv();
  const admin = postgres(env.databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`DROP DATABASE IF EXISTS ${TEMPLATE_DATABASE}`);
    await admin.unsafe(`CREATE DATABASE ${TEMPLATE_DATABASE}`);
    await resetSharedSlides(admin);
  } finally {
    await admin.end();
  }
  const url = new URL(env.databaseUrl);
  url.pathname = `/${TEMPLATE_DATABASE}`;
  const template = postgres(url.toString(), { max: 1, onnotice: () => {} });
  try {
    await migrate(template);
  } finally {
    await template.end();
  }
  await ensureWorkflowBundle();
}
