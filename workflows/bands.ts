import { CancellationScope } from '@temporalio/workflow';

/**
 * Runs `run(0)` to `run(count - 1)` with at most `concurrency` at once, starting them in order;
 * answers their results by index. The first that fails cancels those still running (they stop
 * before this answers) and starts no more; its error is rethrown. A cancel of the calling scope
 * reaches every one running. Each run is one activity or a few, so a workflow's history grows
 * with `count`, never with the work inside a run.
 */
export async function runBands<T>(
  count: number,
  concurrency: number,
  run: (band: number) => Promise<T>,
): Promise<T[]> {
  const results = new Array<T>(count);
  const scope = new CancellationScope();
  let next = 0;
  let failed = false;
  const lane = async () => {
    while (!failed && next < count) {
      const band = next++;
      results[band] = await run(band);
    }
  };
  await scope.run(async () => {
    const lanes = Array.from({ length: Math.max(1, Math.min(concurrency, count)) }, lane);
    try {
      await Promise.all(lanes);
    } catch (err) {
      failed = true;
      scope.cancel();
      await Promise.allSettled(lanes);
      throw err;
    }
  });
  return results;
}
