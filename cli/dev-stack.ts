import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { type Config, ConfigError } from './config';
import type { LocalService } from './local-services';
import { isAlive } from './processes';

/**
 * `npm start` writes where its services listen beside its data while it runs, so that
 * `npm run admin` in another terminal reaches the same database without being told.
 */
const DevStackSchema = z.object({
  pid: z.number().int().positive(),
  databaseUrl: z.string(),
  temporalAddress: z.string(),
});
type DevStack = z.infer<typeof DevStackSchema>;

const fileIn = (dataDir: string) => path.join(dataDir, 'dev-stack.json');

/** Records this process's stack in `dataDir`; stopping the returned service removes the record. */
export async function recordDevStack(dataDir: string, stack: Omit<DevStack, 'pid'>): Promise<LocalService> {
  const file = fileIn(dataDir);
  // The URL may carry a password: readable by its owner only, like the demo key beside it.
  await writeFile(file, JSON.stringify({ pid: process.pid, ...stack }), { mode: 0o600 });
  return { stop: () => rm(file, { force: true }) };
}

/** A record cut short by a crash is no record. */
function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The stack `npm start` runs from `dataDir`, if one runs (a record left by a crash is not). */
async function runningDevStack(dataDir: string): Promise<DevStack | undefined> {
  const text = await readFile(fileIn(dataDir), 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (text === undefined) return undefined;
  const stack = DevStackSchema.safeParse(parseJson(text));
  return stack.success && isAlive(stack.data.pid) ? stack.data : undefined;
}

/** A second `npm start` on the data of one that runs would fight it for its services and ports. */
export async function refuseSecondStart(dataDir: string): Promise<void> {
  const running = await runningDevStack(dataDir);
  if (running) {
    throw new ConfigError(
      `\`npm start\` already runs from ${dataDir} (process ${running.pid}): use that one, or stop it ` +
        '(Ctrl-C in its terminal) before starting another',
    );
  }
}

/**
 * `config` as given when DATABASE_URL is set; otherwise with the database (and, unless set, the
 * Temporal server) of the `npm start` stack running from the data directory.
 */
export async function withDevStack(config: Config): Promise<Config & { database: { url: string } }> {
  const { url } = config.database;
  if (url) return { ...config, database: { ...config.database, url } };
  const stack = await runningDevStack(config.dataDir);
  if (!stack) {
    throw new ConfigError(
      `Invalid configuration:\n  DATABASE_URL: required; no \`npm start\` runs from ${config.dataDir} ` +
        '(start one there, or set DATABASE_URL to your database)',
    );
  }
  return {
    ...config,
    database: { ...config.database, url: stack.databaseUrl },
    temporal: { ...config.temporal, address: config.temporal.address ?? stack.temporalAddress },
  };
}
