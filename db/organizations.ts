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
