import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Sql } from './index';

// The SQL files sit beside this module in the source tree; the compiled module lives in dist/db.
const MIGRATIONS_DIR = [
  path.join(__dirname, 'migrations'),
  path.join(__dirname, '..', '..', 'db', 'migrations'),
].find((dir) => existsSync(dir));

const MIGRATION_LOCK = 7_310_001;
const FILE_PATTERN = /^(\d{4})-([a-z0-9-]+)\.sql$/;

interface Migration {
  version: number;
  name: string;
  sql: string;
  checksum: string;
}

async function readMigrations(): Promise<Migration[]> {
  if (!MIGRATIONS_DIR) throw new Error('db/migrations not found');
  const files = (await readdir(MIGRATIONS_DIR)).filter((file) => file.endsWith('.sql')).sort();
  return Promise.all(
    files.map(async (file) => {
      const match = FILE_PATTERN.exec(file);
      if (!match) throw new Error(`migration file name must be NNNN-verb-noun.sql: ${file}`);
      const sql = await readFile(path.join(MIGRATIONS_DIR, file), 'utf8');
      return {
        version: Number(match[1]),
        name: match[2]!,
        sql,
        checksum: createHash('sha256').update(sql).digest('hex'),
      };
    }),
  );
}

/**
 * Applies pending migrations in order, in one transaction (a failure applies none), under an advisory lock
 * so that several processes starting at once apply each migration exactly once. A changed
 * file that was already applied is refused: merged migrations are never edited.
 */
export async function migrate(sql: Sql): Promise<{ applied: string[] }> {
  const migrations = await readMigrations();
  const applied: string[] = [];
  await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`;
    await tx`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now())`;
    const done = new Map(
      (
        await tx<{ version: number; checksum: string }[]>`SELECT version, checksum FROM schema_migrations`
      ).map((row) => [row.version, row.checksum]),
    );
    for (const migration of migrations) {
      const checksum = done.get(migration.version);
      if (checksum === migration.checksum) continue;
      if (checksum !== undefined) {
        throw new Error(`migration ${migration.version}-${migration.name} changed after it was applied`);
      }
      await tx.savepoint(async (step) => {
        await step.unsafe(migration.sql);
        await step`INSERT INTO schema_migrations (version, name, checksum)
          VALUES (${migration.version}, ${migration.name}, ${migration.checksum})`;
      });
      applied.push(`${String(migration.version).padStart(4, '0')}-${migration.name}`);
    }
  });
  return { applied };
}
