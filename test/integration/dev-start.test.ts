import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { freePort } from '../../cli/ports';
import { createSql } from '../../db';
import { WEB_APP_CALLBACK_PATH, WEB_APP_CLIENT_ID } from '../../schemas/oauth';
import { testEnv } from '../support/env';
import { Browser, formAction } from '../support/oauth';

/**
 * `npm start` as a user runs it (the built `dev start`, which `npm test` builds first): its own
 * embedded PostgreSQL and Temporal dev server on a fresh data folder, the API and a worker, the
 * printed URLs and demo key; Ctrl-C stops everything; a second start reuses the data.
 */
const devScript = path.join(__dirname, '..', '..', 'dist', 'cli', 'dev.js');

interface Started {
  child: ChildProcess;
  apiUrl: string;
  apiKey: string;
  /** The first line printed. */
  first: string;
  password: string;
}

/** This process's environment without DATABASE_URL or TEMPORAL_ADDRESS: start brings its own, as on a fresh machine. */
function withoutServices(): NodeJS.ProcessEnv {
  const { DATABASE_URL: _database, TEMPORAL_ADDRESS: _temporal, ...inherited } = process.env;
  return inherited;
}

function start(env: Record<string, string>): Promise<Started> {
  const child = spawn(process.execPath, [devScript, 'start'], { env: { ...withoutServices(), ...env } });
  let stdout = '';
  let stderr = '';
  return new Promise((resolve, reject) => {
    child.stderr!.on('data', (chunk) => (stderr += chunk));
    child.stdout!.on('data', (chunk) => {
      stdout += chunk;
      const api = /API:\s+(\S+)\/api\/v1/.exec(stdout);
      const key = /Demo API key:\s+(\S+)/.exec(stdout);
      const password = /Sign in:\s+demo@example\.com with password (\S+)/.exec(stdout);
      if (api && key && password) {
        const first = stdout.split('\n').find((line) => line.trim() !== '')!;
        resolve({ child, apiUrl: `${api[1]}/api/v1`, apiKey: key[1]!, first, password: password[1]! });
      }
    });
    child.once('exit', (code) => reject(new Error(`dev start exited with ${code}:\n${stdout}\n${stderr}`)));
  });
}

const nodeMajor = (node: string) =>
  Number(/^v(\d+)/.exec(spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout)?.[1]);

/** A Node older than 22 on this machine (the system's), which a user's `npm` may well run on. */
const olderNode = ['/usr/bin/node', '/usr/local/bin/node'].find(
  (node) => existsSync(node) && nodeMajor(node) < 22,
);

/**
 * `npm run admin -- ARGS` from another terminal: no DATABASE_URL or TEMPORAL_ADDRESS, and the
 * older Node first on PATH when there is one.
 */
function admin(env: Record<string, string>, args: string[]) {
  const inherited = withoutServices();
  const PATH = olderNode ? `${path.dirname(olderNode)}${path.delimiter}${inherited.PATH}` : inherited.PATH;
  return spawnSync('npm', ['run', '--silent', 'admin', '--', ...args], {
    cwd: path.join(__dirname, '..', '..'),
    env: { ...inherited, ...env, PATH },
    encoding: 'utf8',
  });
}

/** The web app's authorization request, then the demo user's sign-in: answers the next page. */
async function signsIn(appUrl: string, password: string): Promise<string> {
  const authorize = new URL(`${appUrl}/oauth2/auth`);
  authorize.search = new URLSearchParams({
    response_type: 'code',
    client_id: WEB_APP_CLIENT_ID,
    redirect_uri: `${appUrl}${WEB_APP_CALLBACK_PATH}`,
    scope: 'samples:read',
    code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    code_challenge_method: 'S256',
    state: 'dev-start',
  }).toString();
  const browser = new Browser();
  const signIn = await browser.follow(authorize.toString(), appUrl);
  const next = await browser.follow(formAction(signIn.text), appUrl, {
    form: { email: 'demo@example.com', password },
  });
  return next.text;
}

function stop(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    child.removeAllListeners('exit');
    child.once('exit', (code) => resolve(code));
    child.kill('SIGINT');
  });
}

test('npm start runs everything, prints the web app URL first, the demo password, the API and a key; Ctrl-C stops it; a restart reuses the data', async () => {
  const dataDir = path.join(testEnv().scratch, `dev-start-${randomBytes(4).toString('hex')}`);
  await mkdir(dataDir, { recursive: true });
  const env = {
    SPS_DATA_DIR: dataDir,
    PORT: String(await freePort()),
    SPS_DEV_POSTGRES_PORT: String(await freePort()),
    SPS_DEV_TEMPORAL_PORT: String(await freePort()),
    SPS_DEV_TEMPORAL_UI_PORT: String(await freePort()),
    LOG_LEVEL: 'warn',
  };
  const first = await start(env);
  // The web app's URL comes first; the demo user signs in on the OAuth pages with the password.
  const appUrl = `http://127.0.0.1:${env.PORT}`;
  expect(first.first).toBe(`Web app:      ${appUrl}/samples`);
  await expect(signsIn(appUrl, first.password)).resolves.toContain('name="organization"');
  const uploads = await fetch(`${first.apiUrl}/uploads`, {
    headers: { authorization: `Bearer ${first.apiKey}` },
  });
  expect(uploads.status).toBe(200);
  const created = await fetch(`${first.apiUrl}/uploads`, {
    method: 'POST',
    headers: { authorization: `Bearer ${first.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ filename: 'kept.svs', fileSize: 1000, contentType: 'image/tiff' }),
  });
  expect(created.status).toBe(200);

  // A second start on the same data says so, and leaves the running one alone.
  const again = spawnSync(process.execPath, [devScript, 'start'], {
    env: { ...withoutServices(), ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  expect({ status: again.status, stderr: again.stderr.trim() }).toEqual({
    status: 1,
    stderr: `\`npm start\` already runs from ${dataDir} (process ${first.child.pid}): use that one, or stop it (Ctrl-C in its terminal) before starting another`,
  });
  expect(
    (await fetch(`${first.apiUrl}/uploads`, { headers: { authorization: `Bearer ${first.apiKey}` } })).status,
  ).toBe(200);

  // The admin commands find this stack's database by themselves, on Node 22 whatever runs npm.
  if (olderNode) expect(nodeMajor(olderNode)).toBeLessThan(22);
  const made = admin(env, ['org', 'create', '--name', 'Made beside npm start']);
  expect({ status: made.status, stderr: made.stderr }).toEqual({ status: 0, stderr: expect.any(String) });
  const { organizationId } = JSON.parse(made.stdout) as { organizationId: string };
  const sql = createSql(`postgres://postgres:postgres@127.0.0.1:${env.SPS_DEV_POSTGRES_PORT}/sps`, {
    max: 1,
  });
  try {
    const rows = await sql`SELECT name FROM organizations WHERE id = ${organizationId}`;
    expect(rows).toEqual([{ name: 'Made beside npm start' }]);
  } finally {
    await sql.end();
  }
  expect(await stop(first.child)).toBe(0);

  // With no stack running, admin says what is missing instead of failing to connect.
  const alone = admin(env, ['org', 'create', '--name', 'Nowhere']);
  expect(alone.status).not.toBe(0);
  expect(alone.stderr).toContain(`DATABASE_URL: required; no \`npm start\` runs from ${dataDir}`);

  const second = await start(env);
  try {
    expect(second.apiKey).toBe(first.apiKey);
    expect(second.password).toBe(first.password);
    const listed = await fetch(`${second.apiUrl}/uploads`, {
      headers: { authorization: `Bearer ${second.apiKey}` },
    });
    const body = (await listed.json()) as { uploads: { filename: string }[] };
    expect(body.uploads.map((upload) => upload.filename)).toEqual(['kept.svs']);
  } finally {
    expect(await stop(second.child)).toBe(0);
  }
}, 240_000);
