import type { Role } from '../schemas/enums';
import type { Queryable } from './index';

export interface ApiKeyRecord {
  id: string;
  organizationId: string;
  userId: string;
  name: string;
  prefix: string;
  createdAt: Date;
  revokedAt: Date | null;
}

/** What a valid key lets the API know about its caller. */
export interface ApiKeyPrincipal {
  keyId: string;
  organizationId: string;
  userId: string;
  role: Role;
  platformAdmin: boolean;
}

/** A key of a member of the organization; undefined when the user is not one. */
export async function insertApiKey(
  sql: Queryable,
  input: { organizationId: string; userId: string; name: string; prefix: string; secretSha256: Buffer },
): Promise<ApiKeyRecord | undefined> {
  const [row] = await sql<ApiKeyRecord[]>`
    INSERT INTO api_keys (organization_id, user_id, name, prefix, secret_sha256)
    SELECT ${input.organizationId}, ${input.userId}, ${input.name}, ${input.prefix}, ${input.secretSha256}
    WHERE EXISTS (SELECT 1 FROM memberships WHERE organization_id = ${input.organizationId} AND user_id = ${input.userId})
    RETURNING id, organization_id AS "organizationId", user_id AS "userId", name, prefix,
      created_at AS "createdAt", revoked_at AS "revokedAt"`;
  return row;
}

/** The caller behind an unrevoked key whose user still belongs to the key's organization. */
export async function findPrincipalByKeyHash(
  sql: Queryable,
  secretSha256: Buffer,
): Promise<ApiKeyPrincipal | undefined> {
  const [row] = await sql<ApiKeyPrincipal[]>`
    SELECT k.id AS "keyId", k.organization_id AS "organizationId", k.user_id AS "userId", m.role,
      u.platform_admin AS "platformAdmin"
    FROM api_keys k
    JOIN memberships m ON m.organization_id = k.organization_id AND m.user_id = k.user_id
    JOIN users u ON u.id = k.user_id
    WHERE k.secret_sha256 = ${secretSha256} AND k.revoked_at IS NULL`;
  return row;
}

/** Marks use at most once a minute, so a busy key does not write on every request. */
export async function touchApiKey(sql: Queryable, keyId: string): Promise<void> {
  await sql`UPDATE api_keys SET last_used_at = now()
    WHERE id = ${keyId} AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`;
}

export async function revokeApiKey(sql: Queryable, keyId: string): Promise<boolean> {
  const rows = await sql`UPDATE api_keys SET revoked_at = now() WHERE id = ${keyId} AND revoked_at IS NULL`;
  return rows.count === 1;
}

/** An organization's keys, newest first, with their user's email: what `admin key list` prints. */
export async function listApiKeys(
  sql: Queryable,
  organizationId: string,
): Promise<(ApiKeyRecord & { email: string; lastUsedAt: Date | null })[]> {
  return sql`
    SELECT k.id, k.organization_id AS "organizationId", k.user_id AS "userId", u.email, k.name, k.prefix,
      k.created_at AS "createdAt", k.last_used_at AS "lastUsedAt", k.revoked_at AS "revokedAt"
    FROM api_keys k JOIN users u ON u.id = k.user_id
    WHERE k.organization_id = ${organizationId}
    ORDER BY k.created_at DESC, k.id`;
}
