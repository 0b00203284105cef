import { request } from 'node:http';
import * as oidc from 'openid-client';
import pino from 'pino';
import { loadConfig } from '../../cli/config';
import { freePort } from '../../cli/ports';
import { type RunningApi, startApi } from '../../cli/runtime';
import { Browser, createOAuthClient, formAction, REDIRECT_URI, setPassword } from '../support/oauth';
import { startStack, type TestStack } from '../support/stack';

/**
 * Password guessing on the sign-in page of the built-in authorization server, against the API
 * process as `sps api` starts it: a growing delay per account and per client address, 429 with
 * `Retry-After` while it lasts (even for the right password), logged. The delay starts at 60 s
 * here so that no answer depends on how fast the machine is; the test moves the clock by
 * ending a block in the database instead of waiting.
 */
let stack: TestStack;
let api: RunningApi;
let clientId: string;
let user: { email: string; password: string };
const logLines: string[] = [];

beforeAll(async () => {
  stack = await startStack();
  const port = await freePort();
  api = await startApi({
    config: loadConfig({
      HOST: '127.0.0.1',
      PORT: String(port),
      TEMPORAL_TASK_QUEUE_PREFIX: stack.taskQueuePrefix,
      SIGN_IN_DELAY_SECONDS: '60',
    }),
    sql: stack.sql,
    store: stack.store,
    client: stack.client,
    signingSecret: stack.signingSecret,
    logger: pino({ level: 'warn' }, { write: (line: string) => void logLines.push(line) }),
  });
  clientId = await createOAuthClient(stack.sql);
  const [row] = await stack.sql<
    { email: string }[]
  >`SELECT email FROM users WHERE id = ${stack.tenant.userId}`;
  user = { email: row!.email, password: await setPassword(stack.sql, row!.email) };
}, 60_000);
afterAll(async () => {
  await api?.close();
  await stack?.close();
});

/** A browser on the sign-in page of a fresh authorization request; answers the form's URL. */
async function openSignIn(): Promise<{ browser: Browser; action: string }> {
  const config = await oidc.discovery(new URL(api.url), clientId, undefined, oidc.None(), {
    execute: [oidc.allowInsecureRequests],
    algorithm: 'oauth2',
  });
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: REDIRECT_URI,
    scope: 'samples:read',
    resource: `${api.url}/api/v1`,
    state: oidc.randomState(),
    code_challenge_method: 'S256',
    code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
  });
  const browser = new Browser();
  const page = await browser.follow(url.toString(), api.url);
  expect(page.text).toContain('name="password"');
  return { browser, action: new URL(formAction(page.text), api.url).toString() };
}

interface Attempt {
  status: number;
  retryAfter: number | undefined;
  text: string;
}

/** Posts the sign-in form from `localAddress` (any 127.x address is this machine). */
function signIn(
  session: { browser: Browser; action: string },
  form: { email: string; password: string },
  localAddress: string,
): Promise<Attempt> {
  const body = new URLSearchParams(form).toString();
  return new Promise((resolve, reject) => {
    const req = request(
      session.action,
      {
        method: 'POST',
        localAddress,
        headers: {
          cookie: session.browser.cookieHeader(),
          'content-type': 'application/x-www-form-urlencoded',
          'content-length': String(Buffer.byteLength(body)),
        },
      },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => {
          text += chunk.toString();
        });
        res.on('end', () => {
          const header = res.headers['retry-after'];
          resolve({ status: res.statusCode ?? 0, retryAfter: header ? Number(header) : undefined, text });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Stands in for waiting out every running block. */
const endBlocks = () => stack.sql`UPDATE sign_in_failures SET blocked_until = now()`;

test('60 wrong passwords for one account from 60 addresses: 401 five times, then 429 with Retry-After; the right one is refused too', async () => {
  const session = await openSignIn();
  const attempts: Attempt[] = [];
  for (let index = 0; index < 60; index++) {
    attempts.push(
      await signIn(session, { email: user.email, password: `wrong-${index}` }, `127.0.1.${index + 1}`),
    );
  }
  expect(attempts.map((attempt) => attempt.status)).toEqual([...Array(5).fill(401), ...Array(55).fill(429)]);
  for (const attempt of attempts.slice(5)) {
    expect(attempt.retryAfter).toBeGreaterThanOrEqual(1);
    expect(attempt.retryAfter).toBeLessThanOrEqual(60);
    expect(attempt.text).toContain('Too many failed sign-ins');
  }
  const right = await signIn(session, user, '127.0.1.200');
  expect(right.status).toBe(429);

  // Once the block ends, the next wrong password doubles it: 120 s.
  await endBlocks();
  expect((await signIn(session, { email: user.email, password: 'wrong-again' }, '127.0.1.201')).status).toBe(
    401,
  );
  const doubled = await signIn(session, user, '127.0.1.202');
  expect(doubled.status).toBe(429);
  expect(doubled.retryAfter).toBeGreaterThan(60);
  expect(doubled.retryAfter).toBeLessThanOrEqual(120);

  // After it, the right password signs in (a redirect onward), and the count starts again.
  await endBlocks();
  const signedIn = await signIn(session, user, '127.0.1.203');
  expect([302, 303]).toContain(signedIn.status);
  expect(await stack.sql`SELECT 1 FROM sign_in_failures WHERE key = ${`account:${user.email}`}`).toHaveLength(
    0,
  );

  expect(logLines.some((line) => line.includes('sign-in failures: throttling'))).toBe(true);
  expect(logLines.some((line) => line.includes('sign-in refused: throttled'))).toBe(true);
});

test('wrong passwords for 25 accounts from one address: 401 twenty times, then 429 for that address only', async () => {
  const session = await openSignIn();
  const statuses: number[] = [];
  for (let index = 0; index < 25; index++) {
    const attempt = await signIn(
      session,
      { email: `nobody-${index}@example.com`, password: 'guess' },
      '127.0.2.1',
    );
    statuses.push(attempt.status);
  }
  expect(statuses).toEqual([...Array(20).fill(401), ...Array(5).fill(429)]);
  expect((await signIn(session, user, '127.0.2.1')).status).toBe(429);
  const elsewhere = await signIn(await openSignIn(), user, '127.0.2.2');
  expect([302, 303]).toContain(elsewhere.status);
});
