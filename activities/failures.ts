import { ApplicationFailure } from '@temporalio/activity';
import { isComputeError } from '../compute/errors';

/**
 * The one mapping of a compute fault to Temporal. A `ComputeError` is a fault of the input (a
 * slide that is no slide, a corrupt store, a model file that breaks its spec): no retry mends
 * it, so it fails the activity for good, typed by its tag, with a message written for the
 * person who gave the input. Anything else is left as it is, for the retry policy to judge.
 */
function failureOf(err: unknown): unknown {
  if (!isComputeError(err)) return err;
  return ApplicationFailure.create({ message: err.message, type: err._tag, nonRetryable: true, cause: err });
}

type Activity = (...args: never[]) => Promise<unknown>;

/** `activities`, each of them failing through `failureOf`. */
export function mappingComputeFailures<T extends Record<string, Activity>>(activities: T): T {
  const mapped: Record<string, Activity> = {};
  for (const [name, activity] of Object.entries(activities)) {
    mapped[name] = async (...args) => {
      try {
        return await activity(...args);
      } catch (err) {
        throw failureOf(err);
      }
    };
  }
  return mapped as T;
}
