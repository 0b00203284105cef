import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { setTimeout as sleep } from 'node:timers/promises';
import { isSpsError, SpsError } from '../../sdk';

export interface DownloadItem {
  /** Where it goes, relative to the target folder. */
  key: string;
  /** Requests the file, from `range` (`bytes=N-`) when resuming. */
  fetch(range: string | undefined, signal: AbortSignal): Promise<Response>;
  /** A 404 means "never written" (a Zarr chunk left at its fill value), not an error. */
  optional?: boolean;
}

export interface DownloadSummary {
  files: number;
  bytes: number;
  skipped: number;
  absent: number;
}

async function sizeOf(file: string): Promise<number | undefined> {
  try {
    return (await stat(file)).size;
  } catch {
    return undefined;
  }
}

/** The whole size a response promises: Content-Range's total for a 206, else Content-Length. */
function totalOf(response: Response, offset: number): number | undefined {
  if (response.status === 206) {
    const match = /^bytes (\d+)-\d+\/(\d+)$/.exec(response.headers.get('content-range') ?? '');
    if (!match || Number(match[1]) !== offset)
      throw new SpsError('invalid_response', 'a range answer for another offset');
    return Number(match[2]);
  }
  const length = response.headers.get('content-length');
  return length === null ? undefined : Number(length);
}

/**
 * One file: bytes go to `FILE.part` (appended from its size when resuming), the size is
 * checked against what the server announced, and only then renamed to `FILE`. A file already
 * at its name is complete.
 */
async function downloadOne(
  dir: string,
  item: DownloadItem,
  signal: AbortSignal,
  onBytes: (bytes: number) => void,
  /** Bytes of this file already counted in this run (an attempt that broke off). */
  counted = 0,
): Promise<'done' | 'skipped' | 'absent'> {
  const target = path.join(dir, item.key);
  if (!path.resolve(target).startsWith(path.resolve(dir) + path.sep)) {
    throw new SpsError('invalid_response', `refusing a key outside the folder: ${item.key}`);
  }
  if ((await sizeOf(target)) !== undefined) return 'skipped';
  const part = `${target}.part`;
  let offset = (await sizeOf(part)) ?? 0;
  let response: Response;
  try {
    response = await item.fetch(offset > 0 ? `bytes=${offset}-` : undefined, signal);
  } catch (err) {
    if (item.optional && isSpsError(err, 'not_found')) return 'absent';
    if (offset > 0 && isSpsError(err) && err.status === 416) {
      await rm(part, { force: true });
      return downloadOne(dir, item, signal, onBytes, counted);
    }
    throw err;
  }
  if (response.status !== 206) offset = 0;
  const total = totalOf(response, offset);
  await mkdir(path.dirname(target), { recursive: true });
  if (offset !== counted) onBytes(offset - counted);
  await appendBody(part, offset > 0, response, onBytes);
  const size = (await sizeOf(part)) ?? 0;
  if (total !== undefined && size !== total) {
    await rm(part, { force: true });
    throw new SpsError('invalid_response', `${item.key}: got ${size} bytes, the server announced ${total}`);
  }
  await rename(part, target);
  return 'done';
}

/**
 * The body into `part`, each piece written before the next is read: a body that breaks off
 * leaves every byte that came in the file, for the next attempt to resume from.
 */
async function appendBody(
  part: string,
  append: boolean,
  response: Response,
  onBytes: (bytes: number) => void,
): Promise<void> {
  const file = await open(part, append ? 'a' : 'w');
  try {
    if (!response.body) return;
    for await (const piece of response.body as WebReadableStream<Uint8Array>) {
      await file.write(piece);
      onBytes(piece.byteLength);
    }
  } finally {
    await file.close();
  }
}

const ATTEMPTS = 5;

/**
 * `run`, again after a connection that failed or broke off (up to `ATTEMPTS` in all, the pause
 * doubling from 0.5 s); each run is to go on from what the last one left. A refusal of the
 * service, a wrong size or this machine's own failure is not retried.
 */
export async function retryingLostConnections<T>(signal: AbortSignal, run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if (signal.aborted || attempt >= ATTEMPTS || !connectionLost(err)) throw err;
      await sleep(500 * 2 ** (attempt - 1), undefined, { signal });
    }
  }
}

/** `downloadOne`, each attempt resuming from what reached `FILE.part`. */
function downloadWithRetries(
  dir: string,
  item: DownloadItem,
  signal: AbortSignal,
  onBytes: (bytes: number) => void,
): Promise<'done' | 'skipped' | 'absent'> {
  let counted = 0;
  const count = (bytes: number) => {
    counted += bytes;
    onBytes(bytes);
  };
  return retryingLostConnections(signal, () => downloadOne(dir, item, signal, count, counted));
}

/** No answer (`network`), or an answer whose body stopped coming (undici: `terminated`). */
function connectionLost(err: unknown): boolean {
  if (isSpsError(err)) return err.code === 'network';
  // By name: undici's errors come from Node's own realm, where `instanceof` may not see them.
  const { name, message } = (err ?? {}) as { name?: unknown; message?: unknown };
  return name === 'TypeError' && message === 'terminated';
}

/** Downloads `items` into `dir`, `parallel` at a time; a rerun continues where this one stopped. */
export async function downloadAll(
  dir: string,
  items: DownloadItem[],
  options: { parallel: number; signal: AbortSignal; onBytes?: (bytes: number) => void; onFile?: () => void },
): Promise<DownloadSummary> {
  const summary: DownloadSummary = { files: 0, bytes: 0, skipped: 0, absent: 0 };
  const onBytes = (bytes: number) => {
    summary.bytes += bytes;
    options.onBytes?.(bytes);
  };
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++]!;
      const outcome = await downloadWithRetries(dir, item, options.signal, onBytes);
      if (outcome === 'done') summary.files++;
      else if (outcome === 'skipped') summary.skipped++;
      else summary.absent++;
      options.onFile?.();
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, options.parallel) }, worker));
  return summary;
}
