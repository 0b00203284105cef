import type { Queryable } from './index';

export interface Organization {
  id: string;
  name: string;
  defaultExpirationDays: number | null;
  autoSegmentDefault: boolean | null;
  activeJobCap: number;
  /** null: the full marker panel. */
  markerEntitlement: string[] | null;
  createdAt: Date;
}

export async function insertOrganization(
  sql: Queryable,
  input: { name: string; defaultExpirationDays?: number | null; autoSegmentDefault?: boolean | null },
): Promise<Organization> {
  const [row] = await sql<Organization[]>`
    INSERT INTO organizations (name, default_expiration_days, auto_segment_default)
    VALUES (${input.name}, ${input.defaultExpirationDays ?? null}, ${input.autoSegmentDefault ?? null})
    RETURNING id, name, default_expiration_days AS "defaultExpirationDays",
      auto_segment_default AS "autoSegmentDefault", active_job_cap AS "activeJobCap",
      marker_entitlement AS "markerEntitlement", created_at AS "createdAt"`;
  return row!;
}

export async function findOrganization(
  sql: Queryable,
  organizationId: string,
): Promise<Organization | undefined> {
  const [row] = await sql<Organization[]>`
    SELECT id, name, default_expiration_days AS "defaultExpirationDays",
      auto_segment_default AS "autoSegmentDefault", active_job_cap AS "activeJobCap",
      marker_entitlement AS "markerEntitlement", created_at AS "createdAt"
    FROM organizations WHERE id = ${organizationId}`;
  return row;
}

/** Every organization with its credits and head count, oldest first: what `admin org list` prints. */
export async function listOrganizations(
  sql: Queryable,
): Promise<
  { id: string; name: string; balance: number; pending: number; members: number; createdAt: Date }[]
> {
  const rows = await sql<
    { id: string; name: string; balance: string; pending: string; members: number; createdAt: Date }[]
  >`
    SELECT o.id, o.name, o.created_at AS "createdAt",
      (SELECT coalesce(sum(balance_delta), 0) FROM credit_ledger c WHERE c.organization_id = o.id) AS balance,
      (SELECT coalesce(sum(pending_delta), 0) FROM credit_ledger c WHERE c.organization_id = o.id) AS pending,
      (SELECT count(*)::int FROM memberships m WHERE m.organization_id = o.id) AS members
    FROM organizations o ORDER BY o.created_at, o.id`;
  return rows.map((row) => ({ ...row, balance: Number(row.balance), pending: Number(row.pending) }));
}
