import type { Queryable } from './index';

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
