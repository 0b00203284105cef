import type { Queryable } from './index';

/**
 * Takes one token from the credential's bucket (refilled at `ratePerSecond`, capped at
 * `burst`). The bucket lives in PostgreSQL so that every API replica shares it.
 */
export async function takeRateToken(
  sql: Queryable,
  input: { key: string; ratePerSecond: number; burst: number },
): Promise<{ allowed: boolean; retryAfterSeconds: number }> {
  const [row] = await sql<{ allowed: boolean; tokens: number }[]>`
    SELECT allowed, tokens FROM take_rate_token(${input.key}, ${input.ratePerSecond}, ${input.burst})`;
  const { allowed, tokens } = row!;
  return {
    allowed,
    retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((1 - tokens) / input.ratePerSecond)),
  };
}
