import type { Role } from '../schemas/enums';
import type { Queryable } from './index';

export interface User {
  id: string;
  email: string;
  platformAdmin: boolean;
}

/** Creates the user, or returns the existing one with that email. */
export async function upsertUser(
  sql: Queryable,
  input: { email: string; platformAdmin?: boolean },
): Promise<User> {
  const [row] = await sql<User[]>`
    INSERT INTO users (email, platform_admin) VALUES (${input.email.toLowerCase()}, ${input.platformAdmin ?? false})
    ON CONFLICT (email) DO UPDATE SET platform_admin = users.platform_admin OR EXCLUDED.platform_admin
    RETURNING id, email, platform_admin AS "platformAdmin"`;
  return row!;
}

/** Makes the user a member with `role`; the role they had before, if they were one. */
export async function upsertMembership(
  sql: Queryable,
  input: { organizationId: string; userId: string; role: Role },
): Promise<Role | undefined> {
  const [row] = await sql<{ before: Role | null }[]>`
    WITH before AS (
      SELECT role FROM memberships WHERE organization_id = ${input.organizationId} AND user_id = ${input.userId}
    )
    INSERT INTO memberships (organization_id, user_id, role)
    VALUES (${input.organizationId}, ${input.userId}, ${input.role})
    ON CONFLICT (organization_id, user_id) DO UPDATE SET role = EXCLUDED.role
    RETURNING (SELECT role FROM before) AS before`;
  return row?.before ?? undefined;
}

/** An organization's members with their role, owners first: what `admin user list` prints. */
export async function listMembers(
  sql: Queryable,
  organizationId: string,
): Promise<(User & { role: Role; passwordSet: boolean })[]> {
  return sql`
    SELECT u.id, u.email, u.platform_admin AS "platformAdmin", m.role, u.password_hash IS NOT NULL AS "passwordSet"
    FROM memberships m JOIN users u ON u.id = m.user_id
    WHERE m.organization_id = ${organizationId}
    ORDER BY array_position(ARRAY['owner', 'admin', 'member'], m.role), u.email`;
}
