import { CancellationScope, defineQuery, defineSignal, setHandler } from '@temporalio/workflow';
import { type JobWorkflowState, operatorMessages, type TilesReport } from '../schemas/temporal';

const stateQuery = defineQuery<JobWorkflowState>(operatorMessages.state);
const cancelSignal = defineSignal(operatorMessages.cancel);
const tilesSignal = defineSignal<[TilesReport]>(operatorMessages.tiles);

/**
 * The state a job's workflow answers to the `state` query, kept as its steps go and as its
 * activity reports tiles (`tiles` signal). `step(name, status)` before each activity; `done`
 * with the outcome once settled.
 */
export function operatorState(status: string) {
  const state: JobWorkflowState = { status, step: null, progress: null, tilesDone: null, tiles: null };
  const count = (report: TilesReport) => {
    // Bands of one job report at once, each a lower bound of the tiles done: the highest stands.
    if (report.tiles === state.tiles && report.tilesDone < (state.tilesDone ?? 0)) return;
    state.tilesDone = report.tilesDone;
    state.tiles = report.tiles;
    state.progress = report.tiles === 0 ? null : report.tilesDone / report.tiles;
  };
  setHandler(stateQuery, () => state);
  setHandler(tilesSignal, count);
  return {
    step(name: string, stepStatus: string = state.status) {
      state.step = name;
      state.status = stepStatus;
    },
    count,
    done(outcome: string) {
      state.step = null;
      state.status = outcome;
    },
  };
}

/**
 * A scope the operator's `cancel` signal cancels: the job's active steps run in it, so that a
 * cancel from the UI takes the same path (cancellation, then the settlement outside the scope)
 * as the API's cancel of the whole workflow.
 */
export function cancellableByOperator(): CancellationScope {
  const scope = new CancellationScope();
  setHandler(cancelSignal, () => scope.cancel());
  return scope;
}
