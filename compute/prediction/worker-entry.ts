import { existsSync } from 'node:fs';
import path from 'node:path';
import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * A worker thread running the entry module `name` of `folder` (this one by default): the
 * compiled `.js` (dist/), or else the TypeScript source, for a runtime that loads TypeScript in
 * its worker threads (the tests register one: test/support/ts-workers.ts).
 */
export function startWorker(name: string, options: WorkerOptions, folder = __dirname): Worker {
  const compiled = path.join(folder, `${name}.js`);
  return new Worker(existsSync(compiled) ? compiled : path.join(folder, `${name}.ts`), options);
}
