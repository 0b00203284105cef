import { decodeJwt } from 'jose';
import * as oidc from 'openid-client';
import { runAdminCommand } from '../../cli/admin-commands';
import { apiClient } from '../support/http';
import {
  authorizationUrl,
  Browser,
  createOAuthClient,
  discover,
  formAction,
  obtainTokens,
  REDIRECT_URI,
  setPassword,
  signInAndConsent,
  signWithServerKey,
} from '../support/oauth';
import { insertSample } from '../support/samples';
import { createTenant, type ExtraApi, startStack, type Tenant, type TestStack } from '../support/stack';

/**
 * The built-in authorization server end to end with a real OAuth client library
 * (openid-client): discovery, PKCE, sign-in, organization consent, code exchange, API calls,
 * refresh with rotation, revocation, and the attacks each step must refuse.
 */
let stack: TestStack;
let config: oidc.Configuration;
let clientId: string;
let user: { email: string; password: string; organizationId: string };
let second: Tenant;

const errorOf = async (promise: Promise<unknown>): Promise<string> => {
  try {
    await promise;
  } catch (err) {
    return String((err as { error?: string }).error ?? (err as Error).message);
  }
  throw new Error('expected a failure');
};

beforeAll(async () => {
  stack = await startStack();
  clientId = await createOAuthClient(stack.sql);
  config = await discover(stack, clientId);
  const [email] = await stack.sql<
    { email: string }[]
  >`SELECT email FROM users WHERE id = ${stack.tenant.userId}`;
  user = { email: email!.email, password: await setPassword(stack.sql, email!.email), organizationId: '' };
  // The user also belongs to a second organization: consent picks which one a token is for.
  second = await createTenant(stack.sql);
  await runAdminCommand(stack.sql, [
    'user',
    'create',
    '--email',
    user.email,
    '--org',
    second.organizationId,
    '--role',
    'member',
  ]);
  user.organizationId = second.organizationId;
}, 60_000);
afterAll(async () => {
  await stack?.close();
});

describe('discovery', () => {
  test('RFC 8414 metadata names the /oauth2 endpoints, S256 only, code only, the six scopes', async () => {
    const metadata = config.serverMetadata();
    expect(metadata.issuer).toBe(stack.baseUrl);
    expect(metadata.authorization_endpoint).toBe(`${stack.baseUrl}/oauth2/auth`);
    expect(metadata.token_endpoint).toBe(`${stack.baseUrl}/oauth2/token`);
    expect(metadata.code_challenge_methods_supported).toEqual(['S256']);
    expect(metadata.response_types_supported).toEqual(['code']);
    expect(metadata.scopes_supported).toEqual([
      'samples:read',
      'samples:write',
      'jobs:read',
      'jobs:write',
      'results:read',
      'credits:spend',
    ]);
    const jwks = (await (await fetch(metadata.jwks_uri!)).json()) as { keys: Record<string, string>[] };
    expect(jwks.keys).toHaveLength(1);
    expect(jwks.keys[0]).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' });
    expect(jwks.keys[0]!.d).toBeUndefined();
  });
});

describe('the whole flow', () => {
  test('authorize with PKCE, sign in, consent for an organization, exchange, call, refresh, revoke', async () => {
    const tokens = await obtainTokens(stack, config, user, ['samples:read', 'samples:write']);
    expect(tokens.token_type.toLowerCase()).toBe('bearer');
    expect(tokens.refresh_token).toBeTruthy();
    const claims = decodeJwt(tokens.access_token);
    expect(claims).toMatchObject({
      iss: stack.baseUrl,
      aud: stack.api,
      sub: stack.tenant.userId,
      org_id: second.organizationId,
      scope: 'samples:read samples:write',
    });

    // The token acts for the organization picked on the consent page.
    const asToken = apiClient(stack.api, tokens.access_token);
    const created = await asToken('POST', '/uploads', {
      filename: 'oauth.svs',
      fileSize: 1000,
      contentType: 'image/tiff',
    });
    expect(created.status).toBe(200);
    expect((await apiClient(stack.api, second.apiKey)('GET', `/uploads/${created.json.id}`)).status).toBe(
      200,
    );
    expect(
      (await apiClient(stack.api, stack.tenant.apiKey)('GET', `/uploads/${created.json.id}`)).status,
    ).toBe(404);
    // A scope it was not granted: 403 insufficient_scope.
    const job = await asToken('GET', '/jobs/00000000-0000-4000-8000-000000000000');
    expect(job.status).toBe(403);
    expect(job.json.error).toBe('insufficient_scope');

    // Refresh rotates: the new refresh token works, the old one no longer does.
    const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token!, { resource: stack.api });
    expect(refreshed.refresh_token).toBeTruthy();
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
    expect(decodeJwt(refreshed.access_token)).toMatchObject({ org_id: second.organizationId });
    expect((await apiClient(stack.api, refreshed.access_token)('GET', '/samples')).status).toBe(200);
    expect(await errorOf(oidc.refreshTokenGrant(config, tokens.refresh_token!))).toBe('invalid_grant');

    // Revoking the refresh token ends the grant: no more refreshes, and its access tokens stop.
    // (Reusing the rotated token above already revoked the grant; start a fresh one.)
    const again = await obtainTokens(stack, config, user, ['samples:read']);
    const call = apiClient(stack.api, again.access_token);
    expect((await call('GET', '/samples')).status).toBe(200);
    await oidc.tokenRevocation(config, again.refresh_token!, { token_type_hint: 'refresh_token' });
    expect(await errorOf(oidc.refreshTokenGrant(config, again.refresh_token!))).toBe('invalid_grant');
    const after = await call('GET', '/samples');
    expect(after.status).toBe(401);
    expect(after.json.error).toBe('unauthorized');
  });

  test('a refresh token reused after rotation revokes the whole grant (replay detection)', async () => {
    const tokens = await obtainTokens(stack, config, user, ['samples:read']);
    const rotated = await oidc.refreshTokenGrant(config, tokens.refresh_token!);
    expect(await errorOf(oidc.refreshTokenGrant(config, tokens.refresh_token!))).toBe('invalid_grant');
    expect(await errorOf(oidc.refreshTokenGrant(config, rotated.refresh_token!))).toBe('invalid_grant');
    expect((await apiClient(stack.api, rotated.access_token)('GET', '/samples')).status).toBe(401);
  });

  test('denying consent sends access_denied back to the client', async () => {
    const request = await authorizationUrl(config, stack, { scope: 'samples:read' });
    const browser = new Browser();
    const signIn = await browser.follow(request.url, stack.baseUrl);
    const consent = await browser.follow(formAction(signIn.text), stack.baseUrl, {
      form: { email: user.email, password: user.password },
    });
    const back = await browser.follow(formAction(consent.text), stack.baseUrl, {
      form: { decision: 'deny' },
    });
    expect(back.left).toBe(true);
    expect(new URL(back.url).searchParams.get('error')).toBe('access_denied');
  });

  test('a wrong password shows the sign-in page again with 401; consent for a foreign organization is refused', async () => {
    const request = await authorizationUrl(config, stack, { scope: 'samples:read' });
    const browser = new Browser();
    const signIn = await browser.follow(request.url, stack.baseUrl);
    const wrong = await browser.follow(formAction(signIn.text), stack.baseUrl, {
      form: { email: user.email, password: 'not the password' },
    });
    expect(wrong.status).toBe(401);
    expect(wrong.text).toContain('Wrong email or password');
    const consent = await browser.follow(formAction(wrong.text), stack.baseUrl, {
      form: { email: user.email, password: user.password },
    });
    expect(consent.text).toContain(second.organizationId);
    const foreign = await createTenant(stack.sql);
    const refused = await browser.follow(formAction(consent.text), stack.baseUrl, {
      form: { organization: foreign.organizationId, decision: 'allow' },
    });
    expect(refused.status).toBe(400);
    expect(refused.left).toBe(false);
  });
});

describe('the permission gate applies to tokens as to keys', () => {
  test("a member's token may not change the expiration or restore another user's sample (403 forbidden)", async () => {
    // The user is a plain member of the second organization; its owner created the sample.
    const sampleId = await insertSample(stack.sql, {
      organizationId: second.organizationId,
      createdBy: second.userId,
    });
    const tokens = await obtainTokens(stack, config, user, ['samples:read', 'samples:write']);
    const asMember = apiClient(stack.api, tokens.access_token);
    const expiration = await asMember('PATCH', `/samples/${sampleId}/expiration`, { neverExpire: true });
    expect({ status: expiration.status, error: expiration.json.error }).toEqual({
      status: 403,
      error: 'forbidden',
    });
    await apiClient(stack.api, second.apiKey)('DELETE', `/samples/${sampleId}`);
    const restore = await asMember('POST', `/samples/${sampleId}/restore`);
    expect({ status: restore.status, error: restore.json.error }).toEqual({
      status: 403,
      error: 'forbidden',
    });
    // Its own sample passes the gate.
    const own = await insertSample(stack.sql, {
      organizationId: second.organizationId,
      createdBy: stack.tenant.userId,
    });
    expect((await asMember('PATCH', `/samples/${own}/expiration`, { neverExpire: true })).status).toBe(200);
  });
});

describe('refused requests', () => {
  test('wrong PKCE verifier: invalid_grant', async () => {
    const request = await authorizationUrl(config, stack, { scope: 'samples:read' });
    const callback = await signInAndConsent(stack, request.url, user);
    const error = await errorOf(
      oidc.authorizationCodeGrant(config, callback, {
        pkceCodeVerifier: oidc.randomPKCECodeVerifier(),
        expectedState: request.state,
      }),
    );
    expect(error).toBe('invalid_grant');
  });

  test('a code used twice: invalid_grant, and the tokens of the first exchange are revoked', async () => {
    const request = await authorizationUrl(config, stack, { scope: 'samples:read' });
    const callback = await signInAndConsent(stack, request.url, user);
    const checks = { pkceCodeVerifier: request.verifier, expectedState: request.state };
    const first = await oidc.authorizationCodeGrant(config, callback, checks);
    expect((await apiClient(stack.api, first.access_token)('GET', '/samples')).status).toBe(200);
    expect(await errorOf(oidc.authorizationCodeGrant(config, callback, checks))).toBe('invalid_grant');
    expect((await apiClient(stack.api, first.access_token)('GET', '/samples')).status).toBe(401);
  });

  test('PKCE is required and S256 only: a missing or plain challenge is refused', async () => {
    for (const method of [null, 'plain']) {
      const request = await authorizationUrl(config, stack, {
        scope: 'samples:read',
        codeChallengeMethod: method,
      });
      const answer = await new Browser().follow(request.url, stack.baseUrl);
      expect(answer.left).toBe(true);
      expect(new URL(answer.url).searchParams.get('error')).toBe('invalid_request');
    }
  });

  test('a redirect URI that is not registered is never redirected to', async () => {
    const request = await authorizationUrl(config, stack, {
      scope: 'samples:read',
      redirectUri: 'http://127.0.0.1:9/elsewhere',
    });
    const answer = await new Browser().follow(request.url, stack.baseUrl);
    expect(answer.left).toBe(false);
    expect(answer.status).toBe(400);
    expect(answer.text).toContain('redirect_uri');
  });

  test('a code exchanged with another redirect URI: invalid_grant', async () => {
    const other = await createOAuthClient(stack.sql, [REDIRECT_URI, 'http://127.0.0.1:9/other']);
    const otherConfig = await discover(stack, other);
    const request = await authorizationUrl(otherConfig, stack, { scope: 'samples:read' });
    const callback = await signInAndConsent(stack, request.url, user);
    const code = callback.searchParams.get('code')!;
    const response = await fetch(`${stack.baseUrl}/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code,
        client_id: other,
        code_verifier: request.verifier,
        redirect_uri: 'http://127.0.0.1:9/other',
      }).toString(),
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: string }).error).toBe('invalid_grant');
  });

  test('another resource: refused at authorization (invalid_target) and at the token endpoint', async () => {
    const request = await authorizationUrl(config, stack, {
      scope: 'samples:read',
      resource: 'https://other.example/api/v1',
    });
    const answer = await new Browser().follow(request.url, stack.baseUrl);
    expect(answer.left).toBe(true);
    expect(new URL(answer.url).searchParams.get('error')).toBe('invalid_target');

    const good = await authorizationUrl(config, stack, { scope: 'samples:read' });
    const callback = await signInAndConsent(stack, good.url, user);
    const error = await errorOf(
      oidc.authorizationCodeGrant(
        config,
        callback,
        { pkceCodeVerifier: good.verifier, expectedState: good.state },
        { resource: 'https://other.example/api/v1' },
      ),
    );
    expect(error).toBe('invalid_target');
  });

  test('scope escalation on refresh: invalid_scope', async () => {
    const tokens = await obtainTokens(stack, config, user, ['samples:read']);
    const error = await errorOf(
      oidc.refreshTokenGrant(config, tokens.refresh_token!, { scope: 'samples:read credits:spend' }),
    );
    expect(error).toBe('invalid_scope');
    // Narrowing is allowed.
    const narrowed = await oidc.refreshTokenGrant(config, tokens.refresh_token!, { scope: 'samples:read' });
    expect(decodeJwt(narrowed.access_token).scope).toBe('samples:read');
  });
});

describe('access tokens at the API', () => {
  const claims = () => ({
    iss: stack.baseUrl,
    aud: stack.api,
    sub: stack.tenant.userId,
    org_id: stack.tenant.organizationId,
    scope: 'samples:read',
    client_id: clientId,
  });

  test('expired, tampered, for another resource, from another issuer, unsigned: 401 unauthorized', async () => {
    const tokens = await obtainTokens(stack, config, user, ['samples:read']);
    const [header, payload, signature] = tokens.access_token.split('.');
    const raised = Buffer.from(
      JSON.stringify({ ...decodeJwt(tokens.access_token), scope: 'samples:read credits:spend' }),
    ).toString('base64url');
    const now = Math.floor(Date.now() / 1000);
    const cases = {
      expired: await signWithServerKey(stack.sql, { ...claims(), iat: now - 7200, exp: now - 3600 }),
      tampered: `${header}.${raised}.${signature}`,
      badSignature: `${header}.${payload}.${signature!.slice(0, -4)}AAAA`,
      otherResource: await signWithServerKey(stack.sql, {
        ...claims(),
        aud: 'https://other.example/api/v1',
        exp: now + 600,
      }),
      otherIssuer: await signWithServerKey(stack.sql, {
        ...claims(),
        iss: 'https://evil.example',
        exp: now + 600,
      }),
      noOrganization: await signWithServerKey(stack.sql, { ...claims(), org_id: undefined, exp: now + 600 }),
      unsigned: `${Buffer.from('{"alg":"none","typ":"at+jwt"}').toString('base64url')}.${payload}.`,
    };
    for (const [name, token] of Object.entries(cases)) {
      const answer = await apiClient(stack.api, token)('GET', '/samples');
      expect({ name, status: answer.status, error: answer.json?.error }).toEqual({
        name,
        status: 401,
        error: 'unauthorized',
      });
    }
  });

  test('a token whose user left the organization stops working', async () => {
    const leaver = await createTenant(stack.sql);
    const [row] = await stack.sql<{ email: string }[]>`SELECT email FROM users WHERE id = ${leaver.userId}`;
    const password = await setPassword(stack.sql, row!.email);
    const tokens = await obtainTokens(
      stack,
      config,
      { email: row!.email, password, organizationId: leaver.organizationId },
      ['samples:read'],
    );
    const call = apiClient(stack.api, tokens.access_token);
    expect((await call('GET', '/samples')).status).toBe(200);
    await stack.sql`DELETE FROM memberships WHERE user_id = ${leaver.userId}`;
    expect((await call('GET', '/samples')).status).toBe(401);
  });

  test('a revoked client: its refresh tokens and access tokens stop working', async () => {
    const own = await createOAuthClient(stack.sql);
    const ownConfig = await discover(stack, own);
    const tokens = await obtainTokens(stack, ownConfig, user, ['samples:read']);
    await runAdminCommand(stack.sql, ['oauth-client', 'revoke', '--id', own]);
    expect((await apiClient(stack.api, tokens.access_token)('GET', '/samples')).status).toBe(401);
    expect(await errorOf(oidc.refreshTokenGrant(ownConfig, tokens.refresh_token!))).toMatch(
      /invalid_(grant|client)/,
    );
  });
});

describe('an API replica that trusts an external issuer', () => {
  /**
   * A second API process configured as a deployment with an external authorization server
   * (`OAUTH_ISSUER`, `OAUTH_JWKS_URL`) would be: it serves no /oauth2 endpoints and verifies
   * tokens against the issuer's published JWKS over HTTP. The issuer here is the built-in
   * server of the first process, standing in for Hydra: a real server, fetched like one.
   */
  let replica: ExtraApi;

  beforeAll(async () => {
    replica = await stack.startApi({
      // Behind the same public address as the issuer's resource, so tokens name it.
      settings: { oauth: { external: { issuer: stack.baseUrl, jwksUrl: `${stack.baseUrl}/oauth2/jwks` } } },
    });
  });
  afterAll(async () => {
    await replica?.close();
  });

  test("the issuer's tokens work, others are 401, and the replica serves no authorization endpoints", async () => {
    const tokens = await obtainTokens(stack, config, user, ['samples:read']);
    const call = apiClient(replica.api, tokens.access_token);
    expect((await call('GET', '/samples')).status).toBe(200);
    expect((await call('GET', '/jobs/00000000-0000-4000-8000-000000000000')).json.error).toBe(
      'insufficient_scope',
    );
    const foreign = await signWithServerKey(stack.sql, {
      ...decodeJwt(tokens.access_token),
      iss: 'https://issuer.example.test',
    });
    expect((await apiClient(replica.api, foreign)('GET', '/samples')).status).toBe(401);
    const tampered = `${tokens.access_token.slice(0, -4)}AAAA`;
    expect((await apiClient(replica.api, tampered)('GET', '/samples')).status).toBe(401);
    expect((await fetch(`${replica.baseUrl}/.well-known/oauth-authorization-server`)).status).toBe(404);
    expect((await fetch(`${replica.baseUrl}/oauth2/jwks`)).status).toBe(404);
  });
});
