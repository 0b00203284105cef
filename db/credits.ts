import type { Queryable, Sql, TransactionSql } from './index';

export interface CreditSummary {
  balance: number;
  pending: number;
}

export async function grantCredits(
  sql: Queryable,
  input: { organizationId: string; amount: number; note?: string },
) {
  if (!Number.isSafeInteger(input.amount) || input.amount <= 0)
    throw new Error('amount must be a positive integer');
  await sql`INSERT INTO credit_ledger (organization_id, kind, balance_delta, pending_delta, note)
    VALUES (${input.organizationId}, 'grant', ${input.amount}, 0, ${input.note ?? null})`;
}

/** Balance and pending reservations are sums over the append-only ledger. */
export async function creditSummary(sql: Queryable, organizationId: string): Promise<CreditSummary> {
  const [row] = await sql<{ balance: string; pending: string }[]>`
    SELECT coalesce(sum(balance_delta), 0) AS balance, coalesce(sum(pending_delta), 0) AS pending
    FROM credit_ledger WHERE organization_id = ${organizationId}`;
  return { balance: Number(row!.balance), pending: Number(row!.pending) };
}

/** Puts `amount` credits of the organization on hold for a job (pending +amount). */
export async function reserveCredits(
  sql: Queryable,
  input: { organizationId: string; jobId: string; amount: number },
): Promise<void> {
  if (!Number.isSafeInteger(input.amount) || input.amount < 0)
    throw new Error('amount must be a non-negative integer');
  await sql`INSERT INTO credit_ledger (organization_id, job_id, kind, balance_delta, pending_delta)
    VALUES (${input.organizationId}, ${input.jobId}, 'reserve', 0, ${input.amount})`;
}

export type SettlementOutcome = 'completed' | 'partial_failed' | 'failed' | 'cancelled';

export interface SettlementAmounts {
  /** Taken from the balance (and from pending). */
  spent: number;
  /** Given back to the available credits (taken from pending only). */
  released: number;
}

/**
 * How a price-locked reservation is settled (DECISIONS.md, Credits): `completed` spends it all,
 * `failed` and `cancelled` release it all, `partial_failed` spends `round(reserved * fraction)`
 * (the share of patches that succeeded) and releases the rest. Pure, so the arithmetic is tested
 * without a database.
 */
export function settlementAmounts(
  reserved: number,
  outcome: SettlementOutcome,
  succeededFraction?: number,
): SettlementAmounts {
  if (!Number.isSafeInteger(reserved) || reserved < 0)
    throw new Error('the reservation must be a non-negative integer');
  switch (outcome) {
    case 'completed':
      return { spent: reserved, released: 0 };
    case 'failed':
    case 'cancelled':
      return { spent: 0, released: reserved };
    case 'partial_failed': {
      if (succeededFraction === undefined || !(succeededFraction >= 0 && succeededFraction <= 1))
        throw new Error('partial_failed needs succeededFraction between 0 and 1');
      const spent = Math.min(reserved, Math.round(reserved * succeededFraction));
      return { spent, released: reserved - spent };
    }
  }
}

export interface SettlementResult extends SettlementAmounts {
  /** False when the job had been settled before: nothing was written this time. */
  settled: boolean;
}

/**
 * Settles a job's reservation inside an open transaction: locks the job row, and unless
 * `jobs.settled_at` is already set writes the spend and release rows and sets it. Use it to
 * settle together with another write (a terminal status); otherwise call `settleJob`.
 */
export async function settleJobInTransaction(
  tx: TransactionSql,
  input: { jobId: string; outcome: SettlementOutcome; succeededFraction?: number },
): Promise<SettlementResult> {
  const [job] = await tx<
    { organizationId: string; reservedCredits: string | null; settledAt: Date | null }[]
  >`
    SELECT organization_id AS "organizationId", reserved_credits AS "reservedCredits", settled_at AS "settledAt"
    FROM jobs WHERE id = ${input.jobId} FOR UPDATE`;
  if (!job) throw new Error(`job ${input.jobId} not found`);
  if (job.settledAt) return { settled: false, spent: 0, released: 0 };
  const amounts = settlementAmounts(Number(job.reservedCredits ?? 0), input.outcome, input.succeededFraction);
  if (amounts.spent > 0) {
    await tx`INSERT INTO credit_ledger (organization_id, job_id, kind, balance_delta, pending_delta, note)
      VALUES (${job.organizationId}, ${input.jobId}, 'spend', ${-amounts.spent}, ${-amounts.spent}, ${input.outcome})`;
  }
  if (amounts.released > 0) {
    await tx`INSERT INTO credit_ledger (organization_id, job_id, kind, balance_delta, pending_delta, note)
      VALUES (${job.organizationId}, ${input.jobId}, 'release', 0, ${-amounts.released}, ${input.outcome})`;
  }
  await tx`UPDATE jobs SET settled_at = now() WHERE id = ${input.jobId}`;
  return { settled: true, ...amounts };
}

/**
 * Settles a job's credit reservation exactly once, whatever the number of calls: the ledger rows
 * and `jobs.settled_at` are written in one transaction under the job's row lock, and a second
 * call finds `settled_at` set and writes nothing (`settled: false`). For the prediction
 * workflow's final activity.
 */
export async function settleJob(
  sql: Sql,
  input: { jobId: string; outcome: SettlementOutcome; succeededFraction?: number },
): Promise<SettlementResult> {
  return sql.begin((tx) => settleJobInTransaction(tx, input));
}

export interface Repricing {
  /** The job's reservation after the call. */
  reservedCredits: number;
  /** Credits given back by this call (0 when the price was exact already). */
  refunded: number;
}

/**
 * Drops the upper-bound reservation of a job submitted before its sample was ready to the exact
 * price (`patchCount x markers`), once: under the job's row lock, a job still provisional and not
 * settled gets its patch count and reservation, and the difference goes back to the available
 * credits as one `reprice` row (pending -n). A second call changes nothing.
 */
export async function repriceProvisionalJob(
  sql: Sql,
  input: { jobId: string; patchCount: number },
): Promise<Repricing> {
  return sql.begin(async (tx) => {
    const [job] = await tx<
      {
        organizationId: string;
        reservedCredits: string;
        markerCount: number;
        priceProvisional: boolean;
        settledAt: Date | null;
      }[]
    >`
      SELECT organization_id AS "organizationId", reserved_credits AS "reservedCredits",
        marker_count AS "markerCount", price_provisional AS "priceProvisional", settled_at AS "settledAt"
      FROM jobs WHERE id = ${input.jobId} FOR UPDATE`;
    if (!job) throw new Error(`job ${input.jobId} not found`);
    const reserved = Number(job.reservedCredits);
    if (!job.priceProvisional || job.settledAt) return { reservedCredits: reserved, refunded: 0 };
    const exact = input.patchCount * job.markerCount;
    if (!Number.isSafeInteger(exact) || exact < 0 || exact > reserved) {
      throw new Error(`the exact price ${exact} is not within the reservation of ${reserved}`);
    }
    const refunded = reserved - exact;
    if (refunded > 0) {
      await tx`INSERT INTO credit_ledger (organization_id, job_id, kind, balance_delta, pending_delta, note)
        VALUES (${job.organizationId}, ${input.jobId}, 'reprice', 0, ${-refunded}, 'exact price')`;
    }
    await tx`UPDATE jobs SET reserved_credits = ${exact}, patch_count = ${input.patchCount},
        price_provisional = false
      WHERE id = ${input.jobId}`;
    return { reservedCredits: exact, refunded };
  });
}
