import { CancellationScope } from '@temporalio/workflow';

/** One piece of a job's work; `after` names the earlier pieces whose output it reads. */
export interface RegionTask {
  after: readonly number[];
}

/**
 * Runs `run(index)` for every task, at most `limit` at once, each once the tasks it comes
 * `after` are done, in the order they became ready (tasks with nothing before them in index
 * order). The first failure (or a
 * cancel of the caller's scope) cancels every task still running and waits for them to stop,
 * then is thrown: no piece keeps writing once this settles. History grows with the tasks, a
 * few events each, never with their progress.
 */
export async function runRegions(
  tasks: readonly RegionTask[],
  limit: number,
  run: (index: number) => Promise<void>,
): Promise<void> {
  if (!(Number.isSafeInteger(limit) && limit >= 1)) throw new RangeError(`at most ${limit} at once`);
  const waitingOn = tasks.map((task) => new Set(task.after).size);
  const dependents = tasks.map((): number[] => []);
  for (const [index, task] of tasks.entries())
    for (const before of new Set(task.after)) dependents[before]!.push(index);
  const ready = waitingOn.flatMap((count, index) => (count === 0 ? [index] : []));
  let started = 0;
  const running = new Map<number, Promise<number>>();
  let done = 0;
  await CancellationScope.cancellable(async () => {
    try {
      while (done < tasks.length) {
        while (running.size < limit && started < ready.length) {
          const index = ready[started++]!;
          running.set(
            index,
            run(index).then(() => index),
          );
        }
        if (running.size === 0) throw new RangeError('tasks wait on each other: none can start');
        const finished = await Promise.race(running.values());
        running.delete(finished);
        done += 1;
        for (const after of dependents[finished]!) if (--waitingOn[after]! === 0) ready.push(after);
      }
    } catch (err) {
      CancellationScope.current().cancel();
      await Promise.allSettled(running.values());
      throw err;
    }
  });
}
