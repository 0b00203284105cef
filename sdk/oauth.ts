import {
  AuthorizationServerMetadata,
  OAuthErrorResponse,
  oauthRoutes,
  TokenResponse,
} from '../schemas/oauth';
import { networkError, SpsError } from './errors';

/**
 * OAuth 2.0 for a public client (a browser app, a notebook): authorization code with PKCE S256
 * and RFC 8707 resource binding, refresh with rotation, RFC 7009 revocation. WebCrypto and fetch
 * only, so it runs in browsers (secure contexts: https or localhost) and Node 22 alike.
 */

/** What a client keeps of a token answer; `expiresAt` is epoch milliseconds. */
export interface TokenSet {
  accessToken: string;
  refreshToken: string | null;
  expiresAt: number;
  scope: string;
}

export interface OAuthClientSettings {
  /** The authorization server (`{auth_url}`); for the built-in one, the service root. */
  issuer: string;
  clientId: string;
  redirectUri: string;
  /** The API root the tokens are bound to (`{base_url}`). */
  resource: string;
  fetch?: typeof fetch;
}

/** What the client keeps between sending the browser away and its return (never the tokens). */
export interface PendingAuthorization {
  verifier: string;
  state: string;
}

const base64url = (bytes: Uint8Array) =>
  btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');

const randomText = (byteCount: number) => base64url(crypto.getRandomValues(new Uint8Array(byteCount)));

async function challengeOf(verifier: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

function oauthFailure(error: string, description?: string, status?: number): SpsError {
  return new SpsError('oauth_failed', description ? `${error}: ${description}` : error, { status });
}

/** One form POST to the server; an RFC 6749 error answer becomes an `oauth_failed` SpsError. */
async function postForm(settings: OAuthClientSettings, url: string, form: Record<string, string>) {
  const doFetch = settings.fetch ?? globalThis.fetch.bind(globalThis);
  let response: Response;
  try {
    response = await doFetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams(form).toString(),
    });
  } catch (err) {
    throw networkError(`POST ${url}`, err);
  }
  const json: unknown = await response.json().catch(() => undefined);
  if (response.ok) return json;
  const failure = OAuthErrorResponse.safeParse(json);
  if (failure.success)
    throw oauthFailure(failure.data.error, failure.data.error_description, response.status);
  throw oauthFailure('server_error', `HTTP ${response.status} from ${url}`, response.status);
}

function tokenSetOf(json: unknown, previous?: TokenSet): TokenSet {
  const parsed = TokenResponse.safeParse(json);
  if (!parsed.success) {
    throw new SpsError('invalid_response', `the token endpoint answered: ${parsed.error.message}`);
  }
  return {
    accessToken: parsed.data.access_token,
    refreshToken: parsed.data.refresh_token ?? previous?.refreshToken ?? null,
    expiresAt: Date.now() + parsed.data.expires_in * 1000,
    scope: parsed.data.scope ?? previous?.scope ?? '',
  };
}

/** A client of one authorization server; its RFC 8414 metadata is read once, when first needed. */
export function createOAuthClient(settings: OAuthClientSettings) {
  let metadata: Promise<AuthorizationServerMetadata> | undefined;
  const discover = () => {
    metadata ??= (async () => {
      const url = `${settings.issuer.replace(/\/+$/, '')}${oauthRoutes.metadata}`;
      const doFetch = settings.fetch ?? globalThis.fetch.bind(globalThis);
      const response = await doFetch(url, { headers: { accept: 'application/json' } });
      if (!response.ok) {
        throw oauthFailure('discovery_failed', `${url} answered HTTP ${response.status}`, response.status);
      }
      const parsed = AuthorizationServerMetadata.safeParse(await response.json().catch(() => undefined));
      if (!parsed.success) throw new SpsError('invalid_response', `${url}: ${parsed.error.message}`);
      return parsed.data;
    })().catch((err) => {
      metadata = undefined;
      throw err;
    });
    return metadata;
  };

  return {
    /** The URL to send the browser to, and what to keep until it comes back. */
    async authorizationUrl(
      scopes: readonly string[],
    ): Promise<{ url: string; pending: PendingAuthorization }> {
      const server = await discover();
      const pending = { verifier: randomText(32), state: randomText(16) };
      const url = new URL(server.authorization_endpoint);
      url.search = new URLSearchParams({
        response_type: 'code',
        client_id: settings.clientId,
        redirect_uri: settings.redirectUri,
        scope: scopes.join(' '),
        resource: settings.resource,
        state: pending.state,
        code_challenge: await challengeOf(pending.verifier),
        code_challenge_method: 'S256',
      }).toString();
      return { url: url.toString(), pending };
    },

    /**
     * The tokens for the redirect back: checks `state` and the RFC 9207 `iss`, turns an `error`
     * into an SpsError, and exchanges the code with the PKCE verifier.
     */
    async finishAuthorization(callback: URL, pending: PendingAuthorization): Promise<TokenSet> {
      const server = await discover();
      const params = callback.searchParams;
      if (params.get('state') !== pending.state) {
        throw oauthFailure('invalid_state', 'the answer is not for the sign-in this tab started');
      }
      const iss = params.get('iss');
      if (iss !== null && iss !== server.issuer)
        throw oauthFailure('invalid_issuer', `unexpected issuer ${iss}`);
      const error = params.get('error');
      if (error) throw oauthFailure(error, params.get('error_description') ?? undefined);
      const code = params.get('code');
      if (!code) throw oauthFailure('invalid_request', 'the answer carries no code');
      const json = await postForm(settings, server.token_endpoint, {
        grant_type: 'authorization_code',
        client_id: settings.clientId,
        code,
        redirect_uri: settings.redirectUri,
        code_verifier: pending.verifier,
        resource: settings.resource,
      });
      return tokenSetOf(json);
    },

    /** New tokens for the refresh token; the server rotates it, so the old one is spent. */
    async refresh(tokens: TokenSet): Promise<TokenSet> {
      if (!tokens.refreshToken) throw oauthFailure('invalid_grant', 'no refresh token to refresh with');
      const server = await discover();
      const json = await postForm(settings, server.token_endpoint, {
        grant_type: 'refresh_token',
        client_id: settings.clientId,
        refresh_token: tokens.refreshToken,
        resource: settings.resource,
      });
      return tokenSetOf(json, tokens);
    },

    /** RFC 7009: revoking the refresh token ends its grant, and with it every access token. */
    async revoke(tokens: TokenSet): Promise<void> {
      if (!tokens.refreshToken) return;
      const server = await discover();
      await postForm(settings, server.revocation_endpoint, {
        client_id: settings.clientId,
        token: tokens.refreshToken,
        token_type_hint: 'refresh_token',
      });
    },
  };
}

export type OAuthClient = ReturnType<typeof createOAuthClient>;

/**
 * A bearer credential that refreshes itself: before the access token expires (within
 * `skewMs`), and once when the service rejects it (the transport's `onUnauthorized`).
 * Concurrent callers share one refresh, since each refresh spends the refresh token.
 * `onTokens` hears every new set, and `null` when the server refused the refresh (signed out).
 */
export function refreshingCredential(options: {
  tokens: TokenSet;
  refresh: (tokens: TokenSet) => Promise<TokenSet>;
  onTokens?: (tokens: TokenSet | null) => void;
  skewMs?: number;
}) {
  let current = options.tokens;
  let refreshing: Promise<TokenSet> | undefined;
  const skew = options.skewMs ?? 60_000;
  const refreshOnce = () => {
    refreshing ??= options
      .refresh(current)
      .then((next) => {
        current = next;
        options.onTokens?.(next);
        return next;
      })
      .catch((err: unknown) => {
        if (err instanceof SpsError && err.code === 'oauth_failed') options.onTokens?.(null);
        throw err;
      })
      .finally(() => {
        refreshing = undefined;
      });
    return refreshing;
  };
  return {
    async accessToken(): Promise<string> {
      if (current.expiresAt - skew <= Date.now()) await refreshOnce();
      return current.accessToken;
    },
    /** True when a fresh token is ready for one more try of the rejected request. */
    async onUnauthorized(rejected: string): Promise<boolean> {
      if (rejected !== current.accessToken) return true;
      try {
        await refreshOnce();
        return true;
      } catch {
        return false;
      }
    },
  };
}
