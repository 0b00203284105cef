import path from 'node:path';
import { configDir, readJsonFile, writeFileAtomic } from './files';

export interface Login {
  baseUrl: string;
  apiKey: string;
}

export class UsageError extends Error {}

export const configFile = () => path.join(configDir(), 'config.json');

/** `SPS_BASE_URL` and `SPS_API_KEY` first, then the file `sps login` wrote. */
export async function resolveLogin(overrides: { baseUrl?: string } = {}): Promise<Login> {
  const saved = await readJsonFile<Partial<Login>>(configFile());
  const baseUrl = overrides.baseUrl ?? process.env.SPS_BASE_URL ?? saved?.baseUrl;
  const apiKey = process.env.SPS_API_KEY ?? saved?.apiKey;
  if (!baseUrl || !apiKey) {
    throw new UsageError('not logged in: run `sps login`, or set SPS_BASE_URL and SPS_API_KEY');
  }
  return { baseUrl, apiKey };
}

/** Saved readable by its owner only (0600): it holds a credential. */
export async function saveLogin(login: Login): Promise<string> {
  const file = configFile();
  await writeFileAtomic(file, `${JSON.stringify(login, null, 2)}\n`, 0o600);
  return file;
}
