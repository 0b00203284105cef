import { createHmac } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { calculateJwkThumbprint, createLocalJWKSet, exportJWK, generateKeyPair, type JWK } from 'jose';
import { errors, type KoaContextWithOIDC, Provider } from 'oidc-provider';
import type { Logger } from 'pino';
import type { Sql } from '../../db';
import { findGrantOrganization, insertOAuthSigningKeyIfNone, listOAuthSigningKeys } from '../../db/oauth';
import { oauthScopes } from '../../schemas/enums';
import {
  type AuthorizationServerMetadata,
  GRANT_CLAIM,
  ORGANIZATION_CLAIM,
  oauthRoutes,
} from '../../schemas/oauth';
import { postgresAdapter } from './adapter';
import { type AuthorizationPages, authorizationPages } from './pages';

/** Access tokens are ES256 JWTs: short signatures, and every JOSE library verifies them. */
export const ACCESS_TOKEN_ALG = 'ES256';

export interface AuthorizationServerSettings {
  /** `{auth_url}`: the issuer, and the root the `/oauth2/...` routes hang from. */
  issuer: string;
  /** `{base_url}`: the one resource (RFC 8707) tokens are issued for, and their audience. */
  resource: string;
  /** Keys the interaction and session cookies (derived from the signing secret). */
  cookieSecret: string;
  /** The web app's icon, shown on the sign-in and consent pages. */
  iconUrl: string;
  accessTokenTtlSeconds: number;
  refreshTokenTtlSeconds: number;
}

/** The signing keys, made once (the first start) and kept in the database for every replica. */
async function loadSigningKeys(sql: Sql): Promise<JWK[]> {
  const stored = await listOAuthSigningKeys(sql);
  if (stored.length > 0) return stored as JWK[];
  const { privateKey } = await generateKeyPair(ACCESS_TOKEN_ALG, { extractable: true });
  const jwk = await exportJWK(privateKey);
  const kid = await calculateJwkThumbprint(jwk);
  await insertOAuthSigningKeyIfNone(sql, {
    kid,
    privateJwk: { ...jwk, kid, alg: ACCESS_TOKEN_ALG, use: 'sig' },
  });
  return (await listOAuthSigningKeys(sql)) as JWK[];
}

export function publicJwk(jwk: JWK): JWK {
  const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...rest } = jwk;
  return rest;
}

export function authorizationServerMetadata(issuer: string): AuthorizationServerMetadata {
  return {
    issuer,
    authorization_endpoint: `${issuer}${oauthRoutes.authorization}`,
    token_endpoint: `${issuer}${oauthRoutes.token}`,
    revocation_endpoint: `${issuer}${oauthRoutes.revocation}`,
    jwks_uri: `${issuer}${oauthRoutes.jwks}`,
    response_types_supported: ['code'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
    scopes_supported: [...oauthScopes],
    token_endpoint_auth_methods_supported: ['none', 'client_secret_basic', 'client_secret_post'],
    revocation_endpoint_auth_methods_supported: ['none', 'client_secret_basic', 'client_secret_post'],
    authorization_response_iss_parameter_supported: true,
    resource_indicators_supported: true,
  };
}

function buildProvider(
  sql: Sql,
  settings: AuthorizationServerSettings,
  keys: JWK[],
  logger: Logger,
  pages: AuthorizationPages,
): Provider {
  const cookieKey = createHmac('sha256', settings.cookieSecret).update('oauth-cookies').digest('base64url');
  const provider = new Provider(settings.issuer, {
    adapter: postgresAdapter(sql),
    jwks: { keys },
    cookies: { keys: [cookieKey] },
    responseTypes: ['code'],
    scopes: [],
    clientDefaults: {
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      id_token_signed_response_alg: ACCESS_TOKEN_ALG,
    },
    // oidc-provider 9 knows only S256; requiring it refuses missing challenges too.
    pkce: { required: () => true },
    routes: {
      authorization: oauthRoutes.authorization,
      token: oauthRoutes.token,
      revocation: oauthRoutes.revocation,
      jwks: oauthRoutes.jwks,
      // Not served (features off) but moved under /oauth2 so nothing claims API-root paths.
      userinfo: '/oauth2/me',
      end_session: '/oauth2/session/end',
      introspection: '/oauth2/introspect',
      registration: '/oauth2/reg',
      pushed_authorization_request: '/oauth2/par',
    },
    features: {
      devInteractions: { enabled: false },
      // A client revokes only its own tokens.
      revocation: {
        enabled: true,
        allowedPolicy: async (_ctx, client, token) => token.clientId === client.clientId,
      },
      introspection: { enabled: false },
      userinfo: { enabled: false },
      rpInitiatedLogout: { enabled: false },
      resourceIndicators: {
        enabled: true,
        // A request without `resource` still binds to the API, the only resource there is.
        defaultResource: () => settings.resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: KoaContextWithOIDC, resourceIndicator: string) => {
          if (resourceIndicator !== settings.resource) throw new errors.InvalidTarget();
          return {
            scope: oauthScopes.join(' '),
            audience: settings.resource,
            accessTokenTTL: settings.accessTokenTtlSeconds,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: ACCESS_TOKEN_ALG } },
          };
        },
      },
    },
    // Only the grant the consent page just made: a new authorization always asks again, since
    // the organization is picked per grant and never assumed from an earlier session.
    loadExistingGrant: async (ctx) => {
      const grantId = ctx.oidc.result?.consent?.grantId;
      return grantId ? ctx.oidc.provider.Grant.find(grantId) : undefined;
    },
    findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
    interactions: { url: (_ctx, interaction) => `${oauthRoutes.interaction}/${interaction.uid}` },
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    rotateRefreshToken: () => true,
    expiresWithSession: async () => false,
    extraTokenClaims: async (_ctx, token) => {
      // Only the authorization-code grant is enabled, so every token has a grant.
      const grantId = 'grantId' in token ? token.grantId : undefined;
      const organizationId = grantId ? await findGrantOrganization(sql, grantId) : undefined;
      if (!organizationId) throw new errors.InvalidGrant('the grant names no organization');
      return { [ORGANIZATION_CLAIM]: organizationId, [GRANT_CLAIM]: grantId };
    },
    // A browser app (the web app, a public client) calls the token and revocation endpoints from
    // the origin of its redirect URIs; no other origin, and no confidential client, may.
    clientBasedCORS: (_ctx, origin, client) =>
      client.clientAuthMethod === 'none' &&
      (client.redirectUris ?? []).some((uri) => new URL(uri).origin === origin),
    ttl: {
      AccessToken: settings.accessTokenTtlSeconds,
      AuthorizationCode: 60,
      RefreshToken: settings.refreshTokenTtlSeconds,
      Grant: settings.refreshTokenTtlSeconds,
      Interaction: 3600,
      Session: 24 * 3600,
      IdToken: 3600,
    },
    renderError: async (ctx, out) => {
      ctx.set(pages.headers);
      ctx.type = 'html';
      ctx.body = pages.error(out.error, out.error_description);
    },
  });
  provider.on('server_error', (_ctx, err) => logger.error({ err }, 'oauth server error'));
  return provider;
}

export interface AuthorizationServer {
  settings: AuthorizationServerSettings;
  /** The sign-in, consent and error pages. */
  pages: AuthorizationPages;
  /** The provider, made on first use (it needs the keys from the database). */
  provider(): Promise<Provider>;
  /** Verification keys of the access tokens it issues. */
  verificationKeys(): Promise<ReturnType<typeof createLocalJWKSet>>;
  /** Hands a request to oidc-provider (a Koa app). */
  handle(req: IncomingMessage, res: ServerResponse): Promise<void>;
}

export function createAuthorizationServer(deps: {
  sql: Sql;
  logger: Logger;
  settings: AuthorizationServerSettings;
}): AuthorizationServer {
  type Started = {
    provider: Provider;
    keys: JWK[];
    callback: (req: IncomingMessage, res: ServerResponse) => void;
  };
  const pages = authorizationPages(deps.settings.iconUrl);
  let started: Promise<Started> | undefined;
  const start = () => {
    started ??= loadSigningKeys(deps.sql)
      .then((keys) => {
        const provider = buildProvider(deps.sql, deps.settings, keys, deps.logger, pages);
        return { keys, provider, callback: provider.callback() };
      })
      .catch((err) => {
        // A database outage at first use must not stick: the next request tries again.
        started = undefined;
        throw err;
      });
    return started;
  };
  return {
    settings: deps.settings,
    pages,
    provider: async () => (await start()).provider,
    verificationKeys: async () => createLocalJWKSet({ keys: (await start()).keys.map(publicJwk) }),
    handle: async (req, res) => {
      const { callback } = await start();
      await new Promise<void>((resolve) => {
        res.on('finish', resolve);
        res.on('close', resolve);
        callback(req, res);
      });
    },
  };
}
