import type { Logger } from 'pino';
import type { Sql } from '../../db';
import { forgetSignInFailures, recordSignInFailure, signInBlockedSeconds } from '../../db/sign-in-failures';

/**
 * The growing delay of the sign-in page: after `freeFailuresPerAccount` wrong passwords for
 * one email (or `freeFailuresPerAddress` from one client address), each further failure blocks
 * that account or address for `delaySeconds`, doubling per failure up to `maxDelaySeconds`.
 */
export interface SignInThrottlePolicy {
  freeFailuresPerAccount: number;
  /** 0: no per-address throttle (behind a proxy every client shares its address). */
  freeFailuresPerAddress: number;
  delaySeconds: number;
  maxDelaySeconds: number;
}

export const SIGN_IN_THROTTLE_DEFAULTS: SignInThrottlePolicy = {
  freeFailuresPerAccount: 5,
  freeFailuresPerAddress: 20,
  delaySeconds: 1,
  maxDelaySeconds: 15 * 60,
};

export interface SignInThrottle {
  /** Seconds the attempt must wait (0: go ahead and check the password). */
  waitSeconds(email: string | undefined, address: string): Promise<number>;
  failed(email: string | undefined, address: string): Promise<void>;
  succeeded(email: string): Promise<void>;
}

const accountKey = (email: string) => `account:${email.trim().toLowerCase()}`;
const addressKey = (address: string) => `address:${address}`;

export function createSignInThrottle(deps: {
  sql: Sql;
  logger: Logger;
  policy: SignInThrottlePolicy;
}): SignInThrottle {
  const { sql, logger, policy } = deps;
  const delayAfter = (free: number) => (failures: number) =>
    failures < free ? 0 : Math.min(policy.maxDelaySeconds, policy.delaySeconds * 2 ** (failures - free));
  const keysOf = (email: string | undefined, address: string) => [
    ...(email ? [{ key: accountKey(email), free: policy.freeFailuresPerAccount }] : []),
    ...(policy.freeFailuresPerAddress > 0
      ? [{ key: addressKey(address), free: policy.freeFailuresPerAddress }]
      : []),
  ];
  return {
    async waitSeconds(email, address) {
      const seconds = await signInBlockedSeconds(
        sql,
        keysOf(email, address).map(({ key }) => key),
      );
      if (seconds > 0)
        logger.warn({ email, address, retryAfterSeconds: seconds }, 'sign-in refused: throttled');
      return seconds;
    },
    async failed(email, address) {
      for (const { key, free } of keysOf(email, address)) {
        const failures = await recordSignInFailure(sql, key, delayAfter(free));
        if (failures >= free) {
          logger.warn(
            { key, failures, blockedSeconds: delayAfter(free)(failures) },
            'sign-in failures: throttling',
          );
        }
      }
    },
    async succeeded(email) {
      await forgetSignInFailures(sql, accountKey(email));
    },
  };
}
