import type { Role } from '../schemas/enums';
import type { Queryable, Sql } from './index';

/** One stored oidc-provider model instance, as the adapter contract shapes it. */
export interface OAuthPayloadRow {
  payload: Record<string, unknown>;
  consumedAt: Date | null;
}

export async function upsertOAuthPayload(
  sql: Queryable,
  input: {
    model: string;
    id: string;
    payload: Record<string, unknown>;
    grantId?: string;
    userCode?: string;
    uid?: string;
    expiresInSeconds?: number;
  },
): Promise<void> {
  const expiresAt = input.expiresInSeconds ? new Date(Date.now() + input.expiresInSeconds * 1000) : null;
  await sql`
    INSERT INTO oauth_payloads (model, id, payload, grant_id, user_code, uid, expires_at)
    VALUES (${input.model}, ${input.id}, ${sql.json(input.payload as never)}, ${input.grantId ?? null},
      ${input.userCode ?? null}, ${input.uid ?? null}, ${expiresAt})
    ON CONFLICT (model, id) DO UPDATE SET payload = EXCLUDED.payload, grant_id = EXCLUDED.grant_id,
      user_code = EXCLUDED.user_code, uid = EXCLUDED.uid, expires_at = EXCLUDED.expires_at`;
}

/** An unexpired instance by id, uid or user code. */
export async function findOAuthPayload(
  sql: Queryable,
  model: string,
  by: { id: string } | { uid: string } | { userCode: string },
): Promise<OAuthPayloadRow | undefined> {
  const where =
    'id' in by ? sql`id = ${by.id}` : 'uid' in by ? sql`uid = ${by.uid}` : sql`user_code = ${by.userCode}`;
  const [row] = await sql<OAuthPayloadRow[]>`
    SELECT payload, consumed_at AS "consumedAt" FROM oauth_payloads
    WHERE model = ${model} AND ${where} AND (expires_at IS NULL OR expires_at > now())`;
  return row;
}

export async function consumeOAuthPayload(sql: Queryable, model: string, id: string): Promise<void> {
  await sql`UPDATE oauth_payloads SET consumed_at = now() WHERE model = ${model} AND id = ${id}`;
}

export async function destroyOAuthPayload(sql: Queryable, model: string, id: string): Promise<void> {
  await sql`DELETE FROM oauth_payloads WHERE model = ${model} AND id = ${id}`;
}

/** Revoking a grant removes every artifact issued under it (codes, refresh tokens, the grant). */
export async function revokeOAuthGrant(sql: Queryable, grantId: string): Promise<void> {
  await sql`DELETE FROM oauth_payloads WHERE grant_id = ${grantId} OR (model = 'Grant' AND id = ${grantId})`;
}

/** Drops what has expired; the adapter already ignores it, this only keeps the table small. */
export async function deleteExpiredOAuthPayloads(sql: Queryable): Promise<number> {
  const rows = await sql`DELETE FROM oauth_payloads WHERE expires_at < now()`;
  return rows.count;
}

export interface OAuthClientRecord {
  clientId: string;
  name: string;
  metadata: Record<string, unknown>;
  createdAt: Date;
}

export async function insertOAuthClient(
  sql: Queryable,
  input: { clientId: string; name: string; metadata: Record<string, unknown> },
): Promise<OAuthClientRecord> {
  const [row] = await sql<OAuthClientRecord[]>`
    INSERT INTO oauth_clients (client_id, name, metadata)
    VALUES (${input.clientId}, ${input.name}, ${sql.json(input.metadata as never)})
    RETURNING client_id AS "clientId", name, metadata, created_at AS "createdAt"`;
  return row!;
}

/**
 * Registers a client under a fixed id, or re-registers it with new metadata (the web app's,
 * whose redirect URI follows APP_URL); an earlier revocation is lifted.
 */
export async function upsertOAuthClient(
  sql: Queryable,
  input: { clientId: string; name: string; metadata: Record<string, unknown> },
): Promise<void> {
  await sql`
    INSERT INTO oauth_clients (client_id, name, metadata)
    VALUES (${input.clientId}, ${input.name}, ${sql.json(input.metadata as never)})
    ON CONFLICT (client_id) DO UPDATE
    SET name = EXCLUDED.name, metadata = EXCLUDED.metadata, revoked_at = NULL`;
}

export async function findOAuthClient(
  sql: Queryable,
  clientId: string,
): Promise<OAuthClientRecord | undefined> {
  const [row] = await sql<OAuthClientRecord[]>`
    SELECT client_id AS "clientId", name, metadata, created_at AS "createdAt"
    FROM oauth_clients WHERE client_id = ${clientId} AND revoked_at IS NULL`;
  return row;
}

/** Revokes the client and every grant it holds, so its tokens stop working at once. */
export async function revokeOAuthClient(sql: Sql, clientId: string): Promise<boolean> {
  return sql.begin(async (tx) => {
    const rows = await tx`UPDATE oauth_clients SET revoked_at = now()
      WHERE client_id = ${clientId} AND revoked_at IS NULL`;
    await tx`DELETE FROM oauth_payloads WHERE payload->>'clientId' = ${clientId}`;
    return rows.count === 1;
  });
}

export async function listOAuthSigningKeys(sql: Queryable): Promise<Record<string, unknown>[]> {
  const rows = await sql<{ privateJwk: Record<string, unknown> }[]>`
    SELECT private_jwk AS "privateJwk" FROM oauth_signing_keys
    WHERE retired_at IS NULL ORDER BY created_at DESC, kid`;
  return rows.map((row) => row.privateJwk);
}

/**
 * Stores a new key unless one exists already (replicas starting together): the caller reads
 * the keys again afterwards, so all of them sign with the same one.
 */
export async function insertOAuthSigningKeyIfNone(
  sql: Sql,
  input: { kid: string; privateJwk: Record<string, unknown> },
): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(7310008)`;
    const [existing] = await tx`SELECT 1 FROM oauth_signing_keys WHERE retired_at IS NULL LIMIT 1`;
    if (existing) return;
    await tx`INSERT INTO oauth_signing_keys (kid, private_jwk)
      VALUES (${input.kid}, ${tx.json(input.privateJwk as never)})`;
  });
}

export async function recordGrantOrganization(
  sql: Queryable,
  input: { grantId: string; organizationId: string; userId: string },
): Promise<void> {
  await sql`
    INSERT INTO oauth_grant_organizations (grant_id, organization_id, user_id)
    VALUES (${input.grantId}, ${input.organizationId}, ${input.userId})
    ON CONFLICT (grant_id) DO UPDATE SET organization_id = EXCLUDED.organization_id`;
}

export async function findGrantOrganization(sql: Queryable, grantId: string): Promise<string | undefined> {
  const [row] = await sql<{ organizationId: string }[]>`
    SELECT organization_id AS "organizationId" FROM oauth_grant_organizations WHERE grant_id = ${grantId}`;
  return row?.organizationId;
}

/** What an access token lets the API know about its caller, read fresh on every request. */
export interface TokenPrincipalRow {
  role: Role;
  platformAdmin: boolean;
}

/**
 * The caller behind a token: the user must still belong to the token's organization and, for
 * tokens of the built-in server (`grantId`), the grant must not have been revoked.
 */
export async function findTokenPrincipal(
  sql: Queryable,
  input: { userId: string; organizationId: string; grantId?: string },
): Promise<TokenPrincipalRow | undefined> {
  const grantAlive = input.grantId
    ? sql`AND EXISTS (SELECT 1 FROM oauth_payloads p WHERE p.model = 'Grant' AND p.id = ${input.grantId}
        AND (p.expires_at IS NULL OR p.expires_at > now()))`
    : sql``;
  const [row] = await sql<TokenPrincipalRow[]>`
    SELECT m.role, u.platform_admin AS "platformAdmin"
    FROM memberships m JOIN users u ON u.id = m.user_id
    WHERE m.user_id = ${input.userId} AND m.organization_id = ${input.organizationId} ${grantAlive}`;
  return row;
}

export interface SignInUser {
  id: string;
  email: string;
  passwordHash: string | null;
}

export async function findUserByEmail(sql: Queryable, email: string): Promise<SignInUser | undefined> {
  const [row] = await sql<SignInUser[]>`
    SELECT id, email, password_hash AS "passwordHash" FROM users WHERE email = ${email.trim().toLowerCase()}`;
  return row;
}

export async function findUserEmail(sql: Queryable, userId: string): Promise<string | undefined> {
  const [row] = await sql<{ email: string }[]>`SELECT email FROM users WHERE id = ${userId}`;
  return row?.email;
}

export async function setUserPasswordHash(
  sql: Queryable,
  email: string,
  hash: string,
): Promise<string | undefined> {
  const [row] = await sql<{ id: string }[]>`
    UPDATE users SET password_hash = ${hash} WHERE email = ${email.trim().toLowerCase()} RETURNING id`;
  return row?.id;
}

export interface UserOrganization {
  id: string;
  name: string;
  role: Role;
}

/** The organizations a user may consent for, by name. */
export async function listUserOrganizations(sql: Queryable, userId: string): Promise<UserOrganization[]> {
  return sql<UserOrganization[]>`
    SELECT o.id, o.name, m.role FROM memberships m JOIN organizations o ON o.id = m.organization_id
    WHERE m.user_id = ${userId} ORDER BY o.name, o.id`;
}
