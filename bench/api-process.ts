import { readFile } from 'node:fs/promises';

/** What the benchmarks that run the API as a process of its own ask of it. */

/** Waits until the API at `url` answers /readyz. */
export async function waitReady(url: string): Promise<void> {
  for (let i = 0; i < 240; i++) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error('api did not become ready');
}

/** The resident set of process `pid` now, in MiB. */
export async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024;
}
