import { Context } from '@temporalio/activity';
import { operatorMessages, type TilesReport } from '../schemas/temporal';

/** Each report is an event in the workflow's history: a few a minute are plenty for a person. */
const TILES_REPORT_INTERVAL_MS = 15_000;

export interface TilesReporter {
  report(report: TilesReport): void;
  /** Resolves when every report sent has been answered; an activity awaits it before it ends. */
  settled(): Promise<void>;
}

/**
 * Reports an activity's tiles to its own workflow (the `tiles` signal), for the workflow's
 * `state` query in the Temporal UI: the first report at once, then at most one per interval,
 * one after another. A report that fails is dropped (the next one carries the count), and an
 * activity run without a client (a test's mock environment) reports nothing. The activity
 * awaits `settled()` so that no signal outlives it: a retry of one that fires after the
 * worker closed its connection would throw where nothing can catch it.
 */
export function tilesReporter(intervalMs = TILES_REPORT_INTERVAL_MS): TilesReporter {
  const context = Context.current();
  let last = Number.NEGATIVE_INFINITY;
  let sent: Promise<void> = Promise.resolve();
  return {
    report(report) {
      const now = Date.now();
      if (now - last < intervalMs) return;
      last = now;
      let client: typeof context.client;
      try {
        client = context.client;
      } catch {
        return;
      }
      // Undefined only for a standalone activity, which has no workflow to tell.
      const execution = context.info.workflowExecution;
      if (!execution) return;
      const handle = client.workflow.getHandle(execution.workflowId, execution.runId);
      sent = sent.then(() => handle.signal(operatorMessages.tiles, report)).catch(() => {});
    },
    settled: () => sent,
  };
}
