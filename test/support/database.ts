import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { createSql, type Sql } from '../../db';
import { TEMPLATE_DATABASE, testEnv } from './env';

export interface TestDatabase {
  url: string;
  sql: Sql;
  drop(): Promise<void>;
}

export async function withAdminSql<T>(work: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(testEnv().databaseUrl, { max: 1, onnotice: () => {} });
  try {
    return await work(sql);
  } finally {
    await sql.end();
  }
}

/**
 * An isolated database for one test file: a clone of the migrated template (or of `template`),
 * or empty.
 */
export async function createTestDatabase(
  options: { empty?: boolean; template?: string } = {},
): Promise<TestDatabase> {
  const name = `test_${randomBytes(6).toString('hex')}`;
  const template = options.template ?? TEMPLATE_DATABASE;
  await withAdminSql((sql) =>
    sql.unsafe(options.empty ? `CREATE DATABASE ${name}` : `CREATE DATABASE ${name} TEMPLATE ${template}`),
  );
  const url = new URL(testEnv().databaseUrl);
  url.pathname = `/${name}`;
  const sql = createSql(url.toString(), { max: 5 });
  return {
    url: url.toString(),
    sql,
    async drop() {
      await sql.end({ timeout: 5 });
      await withAdminSql((a) => a.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}
