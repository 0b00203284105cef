import { ActivityFailure, ApplicationFailure, RetryState } from '@temporalio/common';
import { reasonOf } from '../../../workflows/failures';

const FALLBACK = "the step failed on the service's side after several attempts";

/** An activity failure as the workflow receives it, with `cause` as the activity threw it. */
function activityFailure(cause: Error, retryState: RetryState): ActivityFailure {
  return new ActivityFailure('Activity task failed', 'predictJob', '1', retryState, 'worker', cause);
}

describe('reasonOf', () => {
  test('a final failure tells its own message', () => {
    const corrupt = ApplicationFailure.create({
      message: 'zarr.json is not JSON',
      type: 'CorruptZarr',
      nonRetryable: true,
    });
    expect(reasonOf(activityFailure(corrupt, RetryState.NON_RETRYABLE_FAILURE), FALLBACK)).toBe(
      'zarr.json is not JSON',
    );
    expect(reasonOf(corrupt, FALLBACK)).toBe('zarr.json is not JSON');
  });

  test('a failure that ran out of retries tells the fallback, never its internals', () => {
    const internal = ApplicationFailure.create({ message: 'connect ECONNREFUSED 10.0.0.7:5432' });
    expect(reasonOf(activityFailure(internal, RetryState.MAXIMUM_ATTEMPTS_REACHED), FALLBACK)).toBe(FALLBACK);
    expect(reasonOf(new Error('socket hang up'), FALLBACK)).toBe(FALLBACK);
    expect(reasonOf('not even an error', FALLBACK)).toBe(FALLBACK);
  });
});
