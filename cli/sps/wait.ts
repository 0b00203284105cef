import { setTimeout as sleep } from 'node:timers/promises';

/** Calls `read` every `intervalMs` until `done` holds for its answer. */
export async function poll<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  signal: AbortSignal,
  onValue?: (value: T) => void,
  intervalMs = 2000,
): Promise<T> {
  for (;;) {
    const value = await read();
    onValue?.(value);
    if (done(value)) return value;
    await sleep(intervalMs, undefined, { signal });
  }
}
