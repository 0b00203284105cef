import type { RequestHandler } from 'express';
import type { Sql } from '../db';
import { type ApiKeyPrincipal, findPrincipalByKeyHash, touchApiKey } from '../db/api-keys';
import { findTokenPrincipal } from '../db/oauth';
import { type OAuthScope, oauthScopes, type Role } from '../schemas/enums';
import { hashApiKey, looksLikeApiKey } from './credentials';
import { AppError } from './errors';
import type { TokenVerifier } from './oauth/tokens';

/** Who calls, for which organization, with which scopes. API keys carry every scope. */
interface PrincipalBase {
  organizationId: string;
  userId: string;
  role: Role;
  platformAdmin: boolean;
  scopes: ReadonlySet<OAuthScope>;
  /** The rate-limit bucket: one per API key, one per OAuth grant (tokens rotate). */
  credentialId: string;
}

export type Principal =
  | (PrincipalBase & ApiKeyPrincipal & { kind: 'api_key' })
  | (PrincipalBase & { kind: 'oauth'; clientId: string; grantId: string | undefined });

declare module 'express-serve-static-core' {
  interface Locals {
    principal?: Principal;
    requestId?: string;
  }
}

const unauthorized = (message: string) => new AppError('unauthorized', message);
const ALL_SCOPES: ReadonlySet<OAuthScope> = new Set(oauthScopes);

async function apiKeyPrincipal(sql: Sql, token: string): Promise<Principal> {
  const principal = await findPrincipalByKeyHash(sql, hashApiKey(token));
  if (!principal) throw unauthorized('invalid or revoked credential');
  void touchApiKey(sql, principal.keyId).catch(() => {});
  return { ...principal, kind: 'api_key', scopes: ALL_SCOPES, credentialId: `api_key:${principal.keyId}` };
}

async function tokenPrincipal(sql: Sql, verify: TokenVerifier, token: string): Promise<Principal> {
  const verified = await verify(token);
  if (!verified) throw unauthorized('invalid, expired or foreign access token');
  const member = await findTokenPrincipal(sql, verified);
  if (!member) throw unauthorized('the grant was revoked, or the user left the organization');
  return {
    kind: 'oauth',
    organizationId: verified.organizationId,
    userId: verified.userId,
    role: member.role,
    platformAdmin: member.platformAdmin,
    scopes: verified.scopes,
    clientId: verified.clientId,
    grantId: verified.grantId,
    credentialId: `oauth:${verified.grantId ?? verified.tokenId ?? verified.userId}`,
  };
}

/**
 * Resolves `Authorization: Bearer <token>`: an API key of one organization, or an OAuth access
 * token (a JWT for this API's resource) when a verifier is configured.
 */
export function authenticate(sql: Sql, verifyToken?: TokenVerifier): RequestHandler {
  return async (req, res, next) => {
    const header = req.get('authorization');
    const match = header ? /^Bearer\s+(\S+)$/i.exec(header) : null;
    if (!match) return next(unauthorized('missing bearer credential'));
    const token = match[1]!;
    if (looksLikeApiKey(token)) res.locals.principal = await apiKeyPrincipal(sql, token);
    else if (verifyToken) res.locals.principal = await tokenPrincipal(sql, verifyToken, token);
    else throw unauthorized('invalid credential');
    next();
  };
}

export function principalOf(locals: { principal?: Principal }): Principal {
  if (!locals.principal) throw unauthorized('missing bearer credential');
  return locals.principal;
}

/** 403 `insufficient_scope` naming what is missing; API keys always pass. */
export function assertScopes(principal: Principal, required: readonly OAuthScope[]): void {
  const missing = required.filter((scope) => !principal.scopes.has(scope));
  if (missing.length > 0) {
    throw new AppError('insufficient_scope', `the access token lacks ${missing.join(' and ')}`, {
      details: { requiredScopes: [...required], missingScopes: missing },
    });
  }
}
