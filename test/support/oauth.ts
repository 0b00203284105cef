import { randomBytes } from 'node:crypto';
import { importJWK, type JWTPayload, SignJWT } from 'jose';
import * as oidc from 'openid-client';
import { runAdminCommand } from '../../cli/admin-commands';
import type { Sql } from '../../db';
import type { OAuthScope } from '../../schemas/enums';
import type { TestStack } from './stack';

export const REDIRECT_URI = 'http://127.0.0.1:9/callback';

/** Registers a public client through the admin command. */
export async function createOAuthClient(sql: Sql, redirectUris: string[] = [REDIRECT_URI]): Promise<string> {
  const args = ['oauth-client', 'create', '--name', 'Test notebook'];
  for (const uri of redirectUris) args.push('--redirect-uri', uri);
  return String((await runAdminCommand(sql, args)).clientId);
}

/** Gives a user a password through the admin command (returns it). */
export async function setPassword(sql: Sql, email: string): Promise<string> {
  const password = `pw-${randomBytes(9).toString('base64url')}`;
  await runAdminCommand(sql, ['user', 'password', '--email', email, '--password', password]);
  return password;
}

/** The openid-client configuration of a client, found through RFC 8414 discovery. */
export function discover(stack: TestStack, clientId: string): Promise<oidc.Configuration> {
  return oidc.discovery(new URL(stack.baseUrl), clientId, undefined, oidc.None(), {
    execute: [oidc.allowInsecureRequests],
    algorithm: 'oauth2',
  });
}

/**
 * A browser for the authorization server's pages: keeps cookies, follows redirects until one
 * leaves the server (the client's redirect URI, never fetched), and reads forms.
 */
export class Browser {
  private readonly cookies = new Map<string, string>();

  private remember(response: Response): void {
    for (const header of response.headers.getSetCookie()) {
      const [pair, ...attributes] = header.split(';');
      const [name, value] = [pair!.slice(0, pair!.indexOf('=')), pair!.slice(pair!.indexOf('=') + 1)];
      const expired = attributes.some(
        (attribute) => /^\s*expires=/i.test(attribute) && new Date(attribute.split('=')[1]!) < new Date(),
      );
      if (expired || value === '') this.cookies.delete(name.trim());
      else this.cookies.set(name.trim(), value);
    }
  }

  /** The `Cookie` header this browser sends (for a request made another way). */
  cookieHeader(): string {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  /** One request without following redirects. */
  async request(url: string, init: { method?: string; form?: Record<string, string> } = {}) {
    const response = await fetch(url, {
      method: init.method ?? (init.form ? 'POST' : 'GET'),
      redirect: 'manual',
      headers: {
        cookie: this.cookieHeader(),
        ...(init.form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      body: init.form ? new URLSearchParams(init.form).toString() : undefined,
    });
    this.remember(response);
    return {
      status: response.status,
      location: response.headers.get('location'),
      headers: response.headers,
      text: await response.text(),
    };
  }

  /** Follows redirects on `origin`; stops at a page or at a redirect elsewhere. */
  async follow(url: string, origin: string, init: { form?: Record<string, string> } = {}) {
    let current = new URL(url, origin).toString();
    let answer = await this.request(current, init);
    while (answer.status >= 300 && answer.status < 400 && answer.location) {
      const next = new URL(answer.location, current);
      if (next.origin !== new URL(origin).origin) return { ...answer, url: next.toString(), left: true };
      current = next.toString();
      answer = await this.request(current);
    }
    return { ...answer, url: current, left: false };
  }
}

/** The form's `action` on a page of the authorization server. */
export function formAction(html: string): string {
  const match = /<form method="post" action="([^"]+)"/.exec(html);
  if (!match) throw new Error(`no form on the page: ${html.slice(0, 500)}`);
  return match[1]!.replace(/&amp;/g, '&');
}

export interface AuthorizationRequest {
  scope: string;
  resource?: string;
  redirectUri?: string;
  codeChallengeMethod?: string | null;
  verifier?: string;
}

/** The authorization URL a client builds (PKCE S256 unless told otherwise) and its secrets. */
export async function authorizationUrl(
  config: oidc.Configuration,
  stack: TestStack,
  request: AuthorizationRequest,
) {
  const verifier = request.verifier ?? oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  const parameters: Record<string, string> = {
    redirect_uri: request.redirectUri ?? REDIRECT_URI,
    scope: request.scope,
    resource: request.resource ?? stack.api,
    state,
  };
  if (request.codeChallengeMethod !== null) {
    const method = request.codeChallengeMethod ?? 'S256';
    parameters.code_challenge_method = method;
    parameters.code_challenge =
      method === 'S256' ? await oidc.calculatePKCECodeChallenge(verifier) : verifier;
  }
  return { url: oidc.buildAuthorizationUrl(config, parameters).toString(), verifier, state };
}

/**
 * Signs in and consents for `organizationId` in a fresh browser; answers the URL the server
 * redirected back to (with `code`, or `error`).
 */
export async function signInAndConsent(
  stack: TestStack,
  url: string,
  user: { email: string; password: string; organizationId: string },
): Promise<URL> {
  const browser = new Browser();
  const signIn = await browser.follow(url, stack.baseUrl);
  if (signIn.left) return new URL(signIn.url);
  if (signIn.status !== 200 || !signIn.text.includes('name="password"')) {
    throw new Error(`expected the sign-in page, got ${signIn.status}: ${signIn.text.slice(0, 300)}`);
  }
  const consent = await browser.follow(formAction(signIn.text), stack.baseUrl, {
    form: { email: user.email, password: user.password },
  });
  if (consent.status !== 200 || !consent.text.includes('name="organization"')) {
    throw new Error(`expected the consent page, got ${consent.status}: ${consent.text.slice(0, 300)}`);
  }
  const back = await browser.follow(formAction(consent.text), stack.baseUrl, {
    form: { organization: user.organizationId, decision: 'allow' },
  });
  if (!back.left)
    throw new Error(`expected a redirect to the client, got ${back.status}: ${back.text.slice(0, 300)}`);
  return new URL(back.url);
}

/** A full authorization: PKCE, sign-in, consent, code exchange. */
export async function obtainTokens(
  stack: TestStack,
  config: oidc.Configuration,
  user: { email: string; password: string; organizationId: string },
  scopes: readonly OAuthScope[],
) {
  const request = await authorizationUrl(config, stack, { scope: scopes.join(' ') });
  const callback = await signInAndConsent(stack, request.url, user);
  return oidc.authorizationCodeGrant(
    config,
    callback,
    { pkceCodeVerifier: request.verifier, expectedState: request.state },
    { resource: stack.api },
  );
}

/**
 * An access token signed with the server's own key but with claims of the test's choosing
 * (expired, for another resource): what only a forger holding the key, or time, could make.
 */
export async function signWithServerKey(sql: Sql, claims: JWTPayload): Promise<string> {
  const [row] = await sql<{ privateJwk: Record<string, string> }[]>`
    SELECT private_jwk AS "privateJwk" FROM oauth_signing_keys ORDER BY created_at DESC LIMIT 1`;
  if (!row) throw new Error('the authorization server has not made its key yet');
  const key = await importJWK(row.privateJwk, 'ES256');
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: row.privateJwk.kid })
    .sign(key);
}
