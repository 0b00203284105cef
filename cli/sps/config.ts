import path from 'node:path';
import { configDir, readJsonFile, writeFileAtomic } from './files';

export interface Login {
  baseUrl: string;
  apiKey: string;
}

export class UsageError extends Error {}

export const configFile = () => path.join(configDir(), 'config.json');

/**
 * The service URL as given, if it is an http(s) URL: `127.0.0.1:8080` would otherwise read as
 * a URL of the scheme `127.0.0.1:` and fail far from here. No scheme is guessed for it: an API
 * key is not sent over plain http to a host by a guess.
 */
export function serviceUrl(url: string, from: string): string {
  let protocol: string | undefined;
  try {
    protocol = new URL(url).protocol;
  } catch {
    // Not a URL at all: said below.
  }
  if (protocol !== 'http:' && protocol !== 'https:')
    throw new UsageError(`${from} must be an http or https URL such as http://127.0.0.1:8080, got ${url}`);
  return url;
}

/** The service URL given for this run, and where: `--base-url`, else `SPS_BASE_URL`. */
export function givenBaseUrl(flag: string | undefined): { url: string; from: string } | undefined {
  if (flag !== undefined) return { url: flag, from: '--base-url' };
  const env = process.env.SPS_BASE_URL;
  return env === undefined ? undefined : { url: env, from: 'SPS_BASE_URL' };
}

/** `--base-url`, `SPS_BASE_URL` and `SPS_API_KEY` first, then the file `sps login` wrote. */
export async function resolveLogin(overrides: { baseUrl?: string } = {}): Promise<Login> {
  const saved = await readJsonFile<Partial<Login>>(configFile());
  const given = givenBaseUrl(overrides.baseUrl);
  const baseUrl = given ?? { url: saved?.baseUrl, from: `the service URL saved in ${configFile()}` };
  const apiKey = process.env.SPS_API_KEY ?? saved?.apiKey;
  if (!baseUrl.url || !apiKey) {
    throw new UsageError('not logged in: run `sps login`, or set SPS_BASE_URL and SPS_API_KEY');
  }
  return { baseUrl: serviceUrl(baseUrl.url, baseUrl.from), apiKey };
}

/** Saved readable by its owner only (0600): it holds a credential. */
export async function saveLogin(login: Login): Promise<string> {
  const file = configFile();
  await writeFileAtomic(file, `${JSON.stringify(login, null, 2)}\n`, 0o600);
  return file;
}
