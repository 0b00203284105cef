import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { runAdminCommand } from '../../cli/admin-commands';
import { WEB_APP_CLIENT_ID } from '../../schemas/oauth';
import type { TokenSet } from '../../sdk';
import { accessibilityViolations } from '../support/axe';
import { setPassword } from '../support/oauth';
import { insertSample } from '../support/samples';
import { startStack, type TestStack } from '../support/stack';

/**
 * The web app's sign-in against the real stack in headless Chromium: the authorization code
 * flow with PKCE through the built-in server's own sign-in and consent pages, tokens in
 * sessionStorage only, refresh with rotation, sign-out by RFC 7009 revocation.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

let stack: TestStack;
let browser: Browser;
let screenshots: string;
let user: { email: string; password: string };
let sampleId: string;
const problems: string[] = [];

const at = (route: string) => `${stack.baseUrl}${route}`;

async function newPage(): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy/i.test(message.text()))
      problems.push(message.text());
  });
  return { context, page };
}

/** What the tab keeps: the token set in sessionStorage, and how much is in localStorage. */
function storageOf(page: Page) {
  return page.evaluate(() => ({
    tokens: sessionStorage.getItem('sps.oauth.tokens'),
    local: localStorage.length,
  }));
}

async function tokensOf(page: Page): Promise<TokenSet> {
  const { tokens } = await storageOf(page);
  if (!tokens) throw new Error('the tab holds no tokens');
  return JSON.parse(tokens) as TokenSet;
}

/** The list page's own request for samples, and the bearer it carried. */
async function listLoads(page: Page, load: () => Promise<unknown>) {
  const [response] = await Promise.all([
    page.waitForResponse((candidate) => new URL(candidate.url()).pathname === '/api/v1/samples'),
    load(),
  ]).catch(async (err: Error) => {
    // Where the page got stuck, and what it says there.
    const body = await page
      .locator('body')
      .textContent()
      .catch(() => '');
    throw new Error(`${err.message}\nat ${page.url()}: ${body}`);
  });
  await page.locator(`tr[data-id="${sampleId}"]`).waitFor();
  return { status: response.status(), authorization: await response.request().headerValue('authorization') };
}

const apiStatus = async (token: string) =>
  (await fetch(`${stack.api}/samples`, { headers: { authorization: `Bearer ${token}` } })).status;

beforeAll(async () => {
  stack = await startStack();
  // What `npm start` does for its APP_URL: the pages here are served at the stack's origin.
  await runAdminCommand(stack.sql, ['oauth-client', 'web-app', '--app-url', stack.baseUrl]);
  const [row] = await stack.sql<{ email: string }[]>`
    SELECT email FROM users WHERE id = ${stack.tenant.userId}`;
  user = { email: row!.email, password: await setPassword(stack.sql, row!.email) };
  sampleId = await insertSample(stack.sql, {
    organizationId: stack.tenant.organizationId,
    createdBy: stack.tenant.userId,
    name: 'Signed-in tonsil',
  });
  screenshots = path.join(
    process.env.SPS_TEST_ARTIFACTS ?? path.join(__dirname, '..', '..', '.data', 'test-artifacts'),
    'web-app',
  );
  await mkdir(screenshots, { recursive: true });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await stack?.close();
});

test("the app's pages, the sign-in callback included, carry CSP, frame-ancestors 'none' and nosniff", async () => {
  for (const route of ['/samples', '/settings', '/signin/callback']) {
    const response = await fetch(at(route));
    expect({ route, status: response.status }).toEqual({ route, status: 200 });
    const policy = response.headers.get('content-security-policy') ?? '';
    expect(policy).toContain("frame-ancestors 'none'");
    expect(policy).toContain("script-src 'self'");
    expect(policy).toContain("connect-src 'self'");
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    expect(response.headers.get('x-frame-options')).toBe('DENY');
  }
});

describe('a signed-in tab', () => {
  let context: BrowserContext;
  let page: Page;
  beforeAll(async () => {
    ({ context, page } = await newPage());
  });
  afterAll(async () => {
    await context?.close();
  });

  test('signs in through the OAuth pages with consent for the organization; the list loads with the bearer token', async () => {
    await page.goto(at('/samples'));
    await expect(page.locator('#status').textContent()).resolves.toContain('this tab is not signed in');
    const [request] = await Promise.all([
      page.waitForRequest((candidate) => new URL(candidate.url()).pathname === '/oauth2/auth'),
      page.getByRole('button', { name: 'Sign in' }).click(),
    ]);
    const authorize = new URL(request.url()).searchParams;
    expect(Object.fromEntries(authorize)).toMatchObject({
      response_type: 'code',
      client_id: WEB_APP_CLIENT_ID,
      redirect_uri: at('/signin/callback'),
      code_challenge_method: 'S256',
      resource: stack.api,
    });
    expect(authorize.get('code_challenge')).toMatch(/^[\w-]{43}$/);
    await page.waitForURL('**/oauth2/interaction/**');
    await page.getByLabel('Email').waitFor();
    // The server's sign-in page: no script, no framing.
    const signInPage = await fetch(page.url(), {
      headers: { cookie: (await context.cookies()).map((c) => `${c.name}=${c.value}`).join('; ') },
    });
    expect(signInPage.status).toBe(200);
    expect(signInPage.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(signInPage.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(signInPage.headers.get('x-content-type-options')).toBe('nosniff');
    // Its icon is the web app's, and its CSP lets that image in (else the browser asks for a
    // /favicon.ico that is not there).
    await expect(
      page.evaluate(`(async () => {
        const href = document.querySelector('link[rel="icon"]')?.href ?? null;
        const image = new Image();
        image.src = href ?? '';
        return { href, loaded: await image.decode().then(() => true, () => false) };
      })()`),
    ).resolves.toEqual({ href: at('/icon.svg'), loaded: true });
    await expect(accessibilityViolations(page)).resolves.toEqual([]);
    await page.screenshot({ path: path.join(screenshots, 'signin.png'), fullPage: true });
    // A wrong password: the page again, the reason announced to assistive technology.
    await page.getByLabel('Email').fill(user.email);
    await page.getByLabel('Password').fill(`not ${user.password}`);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toBe('Wrong email or password.');
    await expect(page.title()).resolves.toBe('Sign in · Slide Prediction Service');
    await expect(accessibilityViolations(page)).resolves.toEqual([]);
    await page.screenshot({ path: path.join(screenshots, 'signin-refused.png'), fullPage: true });
    await page.getByLabel('Email').fill(user.email);
    await page.getByLabel('Password').fill(user.password);
    await page.getByRole('button', { name: 'Sign in' }).click();

    const organization = page.getByRole('radio');
    await organization.first().waitFor();
    await expect(organization.first().getAttribute('value')).resolves.toBe(stack.tenant.organizationId);
    await expect(page.locator('body').textContent()).resolves.toContain('samples:write');
    await expect(accessibilityViolations(page)).resolves.toEqual([]);
    await page.screenshot({ path: path.join(screenshots, 'consent.png'), fullPage: true });
    const loaded = await listLoads(page, async () => {
      await page.getByRole('button', { name: 'Allow' }).click();
      await page.waitForURL(at('/samples'));
    });
    expect(loaded.status).toBe(200);
    // An OAuth access token (a JWT), not an API key.
    expect(loaded.authorization).toMatch(/^Bearer [\w-]+\.[\w-]+\.[\w-]+$/);
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    const tokens = await tokensOf(page);
    expect(tokens.scope.split(' ').sort()).toEqual(
      ['credits:spend', 'jobs:read', 'jobs:write', 'results:read', 'samples:read', 'samples:write'].sort(),
    );
    expect(tokens.refreshToken).toEqual(expect.any(String));
  }, 60_000);

  test('a reload keeps the session in sessionStorage, and nothing is in localStorage', async () => {
    const before = await tokensOf(page);
    const loaded = await listLoads(page, () => page.reload());
    expect(loaded).toEqual({ status: 200, authorization: `Bearer ${before.accessToken}` });
    const storage = await storageOf(page);
    expect(storage.local).toBe(0);
    expect(JSON.parse(storage.tokens!)).toEqual(before);
  });

  test('an expiring token is refreshed first; the refresh token rotates and the old one is refused', async () => {
    const before = await tokensOf(page);
    // The token's end is what the tab believes: an hour-long token made to look spent.
    await page.evaluate(
      (tokens) => sessionStorage.setItem('sps.oauth.tokens', JSON.stringify({ ...tokens, expiresAt: 0 })),
      before,
    );
    const [refresh] = await Promise.all([
      page.waitForResponse((candidate) => new URL(candidate.url()).pathname === '/oauth2/token'),
      listLoads(page, () => page.reload()),
    ]);
    expect(refresh.status()).toBe(200);
    const after = await tokensOf(page);
    expect(after.accessToken).not.toBe(before.accessToken);
    expect(after.refreshToken).not.toBe(before.refreshToken);
    expect(after.expiresAt).toBeGreaterThan(Date.now() + 30 * 60_000);
    expect(await apiStatus(after.accessToken)).toBe(200);

    // The spent refresh token, replayed by someone who stole it, is refused; the server takes
    // the replay for theft and ends the whole grant, so the fresh tokens stop working too.
    const replay = await fetch(`${stack.baseUrl}/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'refresh_token',
        client_id: WEB_APP_CLIENT_ID,
        refresh_token: before.refreshToken!,
      }).toString(),
    });
    expect({ status: replay.status, body: await replay.json() }).toMatchObject({
      status: 400,
      body: { error: 'invalid_grant' },
    });
    expect(await apiStatus(after.accessToken)).toBe(401);

    // The tab meets the 401, tries one refresh, is refused, and says so: signed out, not blank.
    const [retry] = await Promise.all([
      page.waitForResponse((candidate) => new URL(candidate.url()).pathname === '/oauth2/token'),
      page.reload(),
    ]);
    expect(retry.status()).toBe(400);
    const status = page.locator('#status');
    await status.locator('code').waitFor();
    await expect(status.textContent()).resolves.toMatch(/unauthorized.*grant was revoked/);
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await expect(storageOf(page)).resolves.toEqual({ tokens: null, local: 0 });
  }, 60_000);
});

describe('keyboard only', () => {
  let context: BrowserContext;
  let page: Page;
  beforeAll(async () => {
    ({ context, page } = await newPage());
  });
  afterAll(async () => {
    await context?.close();
  });

  /** Tabs forward until the focused element's text or value is `name` (at most 20 stops). */
  async function tabTo(name: string): Promise<void> {
    for (let stop = 0; stop < 20; stop++) {
      await page.keyboard.press('Tab');
      const focused = await page.evaluate<string>(
        "document.activeElement?.textContent?.trim() || document.activeElement?.value || ''",
      );
      if (focused === name) return;
    }
    throw new Error(`no focusable control named ${name}`);
  }

  test('signs in with the keyboard alone', async () => {
    await page.goto(at('/samples'));
    await page.locator('#status').waitFor();
    await tabTo('Sign in');
    await page.keyboard.press('Enter');
    await page.waitForURL('**/oauth2/interaction/**');
    await page.getByLabel('Email').waitFor();
    await page.keyboard.press('Tab');
    await page.keyboard.type(user.email);
    await page.keyboard.press('Tab');
    await page.keyboard.type(user.password);
    await page.keyboard.press('Enter');
    await page.getByRole('radio').first().waitFor();
    await tabTo('Allow');
    const loaded = await listLoads(page, () => page.keyboard.press('Enter'));
    expect(loaded.status).toBe(200);
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
  }, 60_000);

  test('on a 390x844 screen the signed-in list does not scroll sideways', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await listLoads(page, () => page.reload());
    const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
    expect(overflow).toBe(0);
    await page.screenshot({ path: path.join(screenshots, 'samples-signed-in-narrow.png'), fullPage: true });
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  test('sign-out revokes the grant at the server and forgets the tokens', async () => {
    const tokens = await tokensOf(page);
    expect(await apiStatus(tokens.accessToken)).toBe(200);
    const [revocation] = await Promise.all([
      page.waitForResponse((candidate) => new URL(candidate.url()).pathname === '/oauth2/revoke'),
      page.getByRole('button', { name: 'Sign out' }).click(),
    ]);
    expect(revocation.status()).toBe(200);
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await expect(storageOf(page)).resolves.toEqual({ tokens: null, local: 0 });
    expect(await apiStatus(tokens.accessToken)).toBe(401);
  });
});

test('a development API key in Settings works; the header shows it alone, and Forget key brings back Sign in', async () => {
  const { context, page } = await newPage();
  try {
    await page.goto(at('/settings'));
    await expect(page.locator('#signin-state').textContent()).resolves.toContain('Not signed in');
    await page.getByLabel('API key (development sign-in)').fill(stack.tenant.apiKey);
    await page.keyboard.press('Enter');
    await page.locator('#key-state', { hasText: 'An API key is set' }).waitFor();
    const loaded = await listLoads(page, () => page.goto(at('/samples')));
    expect(loaded).toEqual({ status: 200, authorization: `Bearer ${stack.tenant.apiKey}` });
    await expect(storageOf(page)).resolves.toEqual({ tokens: null, local: 0 });
    // The header shows one state: the key and its Forget button, no Sign in beside them.
    const account = page.locator('#account');
    await account.getByRole('link', { name: 'Using an API key' }).waitFor();
    await expect(account.getByRole('button', { name: 'Sign in' }).count()).resolves.toBe(0);
    await account.getByRole('button', { name: 'Forget key' }).click();
    await account.getByRole('button', { name: 'Sign in' }).waitFor();
    await expect(account.getByText('Using an API key').count()).resolves.toBe(0);
    await expect(page.evaluate(() => sessionStorage.getItem('sps.apiKey'))).resolves.toBeNull();
  } finally {
    await context.close();
  }
});

test('no page broke its CSP or threw', () => {
  expect(problems).toEqual([]);
});
