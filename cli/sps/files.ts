import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** `$XDG_CONFIG_HOME/sps` (else `~/.config/sps`): the login. */
export function configDir(): string {
  return path.join(process.env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config'), 'sps');
}

/** `$XDG_STATE_HOME/sps` (else `~/.local/state/sps`): upload sessions to resume. */
export function stateDir(): string {
  return path.join(process.env.XDG_STATE_HOME || path.join(os.homedir(), '.local', 'state'), 'sps');
}

/**
 * Writes a whole file or nothing: a temporary file beside it, then a rename, so an
 * interrupted run (Ctrl-C, a kill) never leaves it half-written.
 */
export async function writeFileAtomic(file: string, text: string, mode = 0o600): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    await writeFile(temporary, text, { mode });
    await chmod(temporary, mode);
    await rename(temporary, file);
  } catch (err) {
    await rm(temporary, { force: true });
    throw err;
  }
}

export async function readJsonFile<T>(file: string): Promise<T | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as T;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
