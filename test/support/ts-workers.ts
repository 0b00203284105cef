import worker_threads from 'node:worker_threads';

/**
 * Jest runs the TypeScript sources, so compute/ starts its worker threads on .ts entries
 * (compute/prediction/worker-entry.ts), which Node cannot load: here such a worker starts with
 * the swc register (ts-worker-register.js) and then requires its entry. Set up once per process.
 */
const REGISTER = require.resolve('./ts-worker-register.js');
const patched = Symbol.for('sps.ts-workers');
const threads = worker_threads as unknown as Record<PropertyKey, unknown> & {
  Worker: typeof worker_threads.Worker;
};

if (!threads[patched]) {
  threads[patched] = true;
  const Original = threads.Worker;
  threads.Worker = class extends Original {
    constructor(entry: string | URL, options?: worker_threads.WorkerOptions) {
      const file = String(entry);
      if (options?.eval || !file.endsWith('.ts')) super(entry, options);
      else {
        const source = `require(${JSON.stringify(REGISTER)}); require(${JSON.stringify(file)});`;
        super(source, { ...options, eval: true });
      }
    }
  };
}
