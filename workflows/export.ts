import { reasonOf } from './failures';
import { operatorState } from './operator';
import { computeActivities, ioActivities as io } from './proxies';

const SERVICE_FAILURE =
  "the export failed on the service's side after several attempts; request it again to retry";

export interface ExportInput {
  exportId: string;
  /** The export's attempt this run serves; a row that moved on to a later attempt is left alone. */
  attempt: number;
}

/**
 * One conversion (`export-{jobId}-{format}-{selection}`): `running` -> the file is written
 * locally, verified, then stored whole under a key of this attempt -> `ready` with its key and
 * size; any failure records the reason and leaves the export `failed` (retryable by an
 * identical request). A crash mid-conversion retries the activity, which starts the file over:
 * nothing is served before `ready`. Answers the `state` query (status and step).
 */
export async function exportWorkflow(
  input: ExportInput,
): Promise<{ status: 'ready' | 'failed' | 'superseded' }> {
  const state = operatorState('pending');
  try {
    state.step('beginExport');
    if (!(await io.beginExport(input)).active) {
      state.done('superseded');
      return { status: 'superseded' };
    }
    state.step('buildExport', 'running');
    const artifact = await computeActivities({ maximumAttempts: 3 }).buildExport(input);
    state.step('publishExport');
    await io.publishExport({ ...input, ...artifact });
    state.done('ready');
    return { status: 'ready' };
  } catch (err) {
    state.step('failExport');
    await io.failExport({ ...input, error: reasonOf(err, SERVICE_FAILURE) });
    state.done('failed');
    return { status: 'failed' };
  }
}
