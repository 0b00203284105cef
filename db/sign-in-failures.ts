import type { Queryable } from './index';

/** How long failures are remembered after the last one. */
const FORGET_AFTER_SECONDS = 24 * 3600;

/** Seconds until every one of `keys` may try again (0 when none is blocked). */
export async function signInBlockedSeconds(sql: Queryable, keys: readonly string[]): Promise<number> {
  const [row] = await sql<{ seconds: number | null }[]>`
    SELECT ceil(extract(epoch FROM max(blocked_until) - clock_timestamp()))::int AS seconds
    FROM sign_in_failures WHERE key = ANY(${keys as string[]}) AND blocked_until > clock_timestamp()`;
  return row?.seconds ?? 0;
}

/**
 * Counts one failure of `key` (a count older than a day starts again) and blocks the key for
 * `delayFor(failures)` seconds; answers the new count.
 */
export async function recordSignInFailure(
  sql: Queryable,
  key: string,
  delayFor: (failures: number) => number,
): Promise<number> {
  const [row] = await sql<{ failures: number }[]>`
    INSERT INTO sign_in_failures AS f (key, failures, last_failure_at, blocked_until)
    VALUES (${key}, 1, clock_timestamp(), clock_timestamp())
    ON CONFLICT (key) DO UPDATE SET
      failures = CASE
        WHEN f.last_failure_at < clock_timestamp() - make_interval(secs => ${FORGET_AFTER_SECONDS}) THEN 1
        ELSE f.failures + 1 END,
      last_failure_at = clock_timestamp()
    RETURNING failures`;
  const failures = row!.failures;
  await sql`UPDATE sign_in_failures
    SET blocked_until = clock_timestamp() + make_interval(secs => ${delayFor(failures)})
    WHERE key = ${key}`;
  return failures;
}

export async function forgetSignInFailures(sql: Queryable, key: string): Promise<void> {
  await sql`DELETE FROM sign_in_failures WHERE key = ${key}`;
}
