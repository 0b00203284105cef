import { randomUUID } from 'node:crypto';
import { copyFile, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import postgres from 'postgres';
import type { Sql } from '../../db';
import { createSql } from '../../db';
import { workflowIds } from '../../schemas/temporal';
import { createTestDatabase, type TestDatabase } from './database';
import { TEMPLATE_DATABASE, testEnv } from './env';
import { apiClient } from './http';
import { SHARED_WSI, uploadFile } from './uploads';

/**
 * Slides of ../shared/data/wsi that several test files need ingested. The first file that asks
 * ingests them, on the real API and worker, into a template database and objects folder; every
 * file then gets a clone of both, with fresh organization, user and sample ids, so that workflow
 * ids and search attributes stay its own.
 */
export const SHARED_SLIDES = ['CMU-1-Small-Region.svs'] as const;
export type SharedSlideName = (typeof SHARED_SLIDES)[number];

export interface SharedTenant {
  organizationId: string;
  userId: string;
  apiKey: string;
  keyId: string;
}

/** What a build needs running: the API and a worker on `db` and `root`, with a tenant of its own. */
export type StartBuildStack = (
  db: TestDatabase,
  root: string,
) => Promise<{ api: string; tenant: SharedTenant; client: Client; close(): Promise<void> }>;

interface Manifest {
  tenant: SharedTenant;
  samples: Record<SharedSlideName, string>;
}

const SLIDES_DATABASE = 'sps_shared_slides';
const BUILD_DATABASE = 'sps_shared_slides_build';
/** pg_advisory_lock key: one build at a time across parallel test files. */
const BUILD_LOCK = 0x5350_5331;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const folder = () => path.join(testEnv().scratch, 'shared-slides');
const manifestFile = () => path.join(folder(), 'manifest.json');
const objectsFolder = () => path.join(folder(), 'objects');

/** Forgets a previous run's template (global setup: the schema may have changed). */
export async function resetSharedSlides(admin: postgres.Sql): Promise<void> {
  await admin.unsafe(`DROP DATABASE IF EXISTS ${SLIDES_DATABASE} WITH (FORCE)`);
  await admin.unsafe(`DROP DATABASE IF EXISTS ${BUILD_DATABASE} WITH (FORCE)`);
  await rm(folder(), { recursive: true, force: true });
}

/**
 * A database and an objects folder (`root`) where a fresh tenant owns every shared slide,
 * ingested to `ready`; the template is built first if no file has built it yet.
 */
export async function cloneSharedSlides(
  root: string,
  startBuildStack: StartBuildStack,
): Promise<{ db: TestDatabase; tenant: SharedTenant; samples: Record<SharedSlideName, string> }> {
  const manifest = await sharedSlidesTemplate(startBuildStack);
  const renames = new Map<string, string>([
    [manifest.tenant.organizationId, randomUUID()],
    [manifest.tenant.userId, randomUUID()],
    ...Object.values<string>(manifest.samples).map((id): [string, string] => [id, randomUUID()]),
  ]);
  const renamed = (id: string) => renames.get(id) ?? id;
  const db = await createTestDatabase({ template: SLIDES_DATABASE });
  await renameIds(db.sql, renames);
  await copyRenamed(objectsFolder(), root, renamed);
  const samples = Object.fromEntries(
    Object.entries(manifest.samples).map(([name, id]) => [name, renamed(id)]),
  ) as Record<SharedSlideName, string>;
  return {
    db,
    tenant: {
      ...manifest.tenant,
      organizationId: renamed(manifest.tenant.organizationId),
      userId: renamed(manifest.tenant.userId),
    },
    samples,
  };
}

async function sharedSlidesTemplate(startBuildStack: StartBuildStack): Promise<Manifest> {
  const admin = postgres(testEnv().databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await admin`SELECT pg_advisory_lock(${BUILD_LOCK})`;
    const built = await readManifest();
    const [present] = await admin`SELECT 1 AS one FROM pg_database WHERE datname = ${SLIDES_DATABASE}`;
    if (built && present) return built;
    return await buildTemplate(admin, startBuildStack);
  } finally {
    await admin`SELECT pg_advisory_unlock(${BUILD_LOCK})`.catch(() => {});
    await admin.end();
  }
}

async function readManifest(): Promise<Manifest | undefined> {
  try {
    return JSON.parse(await readFile(manifestFile(), 'utf8')) as Manifest;
  } catch {
    return undefined;
  }
}

async function buildTemplate(admin: postgres.Sql, startBuildStack: StartBuildStack): Promise<Manifest> {
  await resetSharedSlides(admin);
  await admin.unsafe(`CREATE DATABASE ${BUILD_DATABASE} TEMPLATE ${TEMPLATE_DATABASE}`);
  const url = new URL(testEnv().databaseUrl);
  url.pathname = `/${BUILD_DATABASE}`;
  const sql = createSql(url.toString(), { max: 5 });
  // Kept, not dropped: it becomes the template once its connections are closed.
  const db: TestDatabase = { url: url.toString(), sql, drop: () => sql.end({ timeout: 5 }) };
  const stack = await startBuildStack(db, objectsFolder());
  let manifest: Manifest;
  try {
    const call = apiClient(stack.api, stack.tenant.apiKey);
    const samples: Partial<Record<SharedSlideName, string>> = {};
    for (const name of SHARED_SLIDES) {
      const { id } = await uploadFile(call, path.join(SHARED_WSI, name));
      const result = await stack.client.workflow.getHandle(workflowIds.ingest(id)).result();
      if (result.status !== 'ready') throw new Error(`shared slide ${name} ingested to ${result.status}`);
      samples[name] = id;
    }
    manifest = { tenant: stack.tenant, samples: samples as Record<SharedSlideName, string> };
  } finally {
    await stack.close();
  }
  await admin.unsafe(`ALTER DATABASE ${BUILD_DATABASE} RENAME TO ${SLIDES_DATABASE}`);
  await writeFile(manifestFile(), JSON.stringify(manifest));
  return manifest;
}

/**
 * Replaces each id of `renames` wherever it occurs in the database: key and reference columns,
 * object keys in text, JSON documents. Foreign keys and triggers (the ledger is append-only)
 * are off for the one transaction, as every reference moves together.
 */
async function renameIds(sql: Sql, renames: ReadonlyMap<string, string>): Promise<void> {
  const pairs = [...renames].map(([from, to]) => {
    if (!UUID.test(from) || !UUID.test(to)) throw new Error(`not a uuid: ${from} -> ${to}`);
    return `ARRAY['${from}', '${to}']`;
  });
  await sql.unsafe(`DO $$
DECLARE
  col record;
  pair text[];
  renamed text;
BEGIN
  PERFORM set_config('session_replication_role', 'replica', true);
  FOR col IN
    SELECT c.oid::regclass AS tbl, a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type
    FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
      AND a.attgenerated = ''
      AND a.atttypid = ANY (ARRAY['uuid', 'text', 'varchar', 'json', 'jsonb', 'uuid[]', 'text[]']::regtype[])
  LOOP
    renamed := format('%I::text', col.name);
    FOREACH pair SLICE 1 IN ARRAY ARRAY[${pairs.join(', ')}] LOOP
      renamed := format('replace(%s, %L, %L)', renamed, pair[1], pair[2]);
    END LOOP;
    EXECUTE format('UPDATE %s SET %I = (%s)::%s WHERE %I::text IS DISTINCT FROM %s',
      col.tbl, col.name, renamed, col.type, col.name, renamed);
  END LOOP;
END $$`);
}

/** Copies the folder `from` to `to`, each file or folder name that is an id renamed. */
async function copyRenamed(from: string, to: string, renamed: (name: string) => string): Promise<void> {
  await mkdir(to, { recursive: true });
  for (const entry of await readdir(from, { withFileTypes: true })) {
    const target = path.join(to, renamed(entry.name));
    if (entry.isDirectory()) await copyRenamed(path.join(from, entry.name), target, renamed);
    else await copyFile(path.join(from, entry.name), target);
  }
}
