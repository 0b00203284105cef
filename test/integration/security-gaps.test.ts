import { createHash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { createApp } from '../../api/app';
import { apiClient } from '../support/http';
import {
  authorizationUrl,
  Browser,
  createOAuthClient,
  discover,
  formAction,
  setPassword,
} from '../support/oauth';
import { insertJob, insertSample } from '../support/samples';
import {
  createTenant,
  defaultTestSettings,
  SHARED_SLIDES_SETUP_MS,
  startStack,
  type TestStack,
} from '../support/stack';
import { SHARED_WSI } from '../support/uploads';

/**
 * The smaller gaps a black-box probe found (issue 23, item 5), each tried over real HTTP the
 * way an attacker or a careless client would.
 */
let stack: TestStack;
let call: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack({ sharedSlides: 'processed' });
  call = apiClient(stack.api, stack.tenant.apiKey);
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await stack?.close();
});

const SLIDE = 'CMU-1-Small-Region.svs';

describe('dedup by contentSha256', () => {
  test('an upload that never finishes does not squat its hash: the next one starts anew', async () => {
    const hash = randomBytes(32).toString('hex');
    const upload = { filename: 'a.svs', fileSize: 1000, contentType: 'image/tiff', contentSha256: hash };
    const squatter = await call('POST', '/uploads', upload);
    expect(squatter.json.existing).toBe(false);
    const honest = await call('POST', '/uploads', upload);
    expect(honest.status).toBe(200);
    expect(honest.json).toMatchObject({ existing: false, status: 'uploading' });
    expect(honest.json.id).not.toBe(squatter.json.id);
    expect(honest.json.uploadUrl).toContain(`/upload-sessions/${honest.json.id}?token=`);
  });

  test('a finished upload matches only with the same fileSize', async () => {
    const bytes = await readFile(path.join(SHARED_WSI, SLIDE));
    const hash = createHash('sha256').update(bytes).digest('hex');
    const upload = { filename: SLIDE, contentType: 'image/tiff', contentSha256: hash };
    const same = await call('POST', '/uploads', { ...upload, fileSize: bytes.length });
    expect(same.status).toBe(200);
    expect(same.json).toMatchObject({ id: stack.sharedSample(SLIDE), existing: true, status: 'ready' });
    expect(same.json.uploadUrl).toBeUndefined();

    const otherSize = await call('POST', '/uploads', { ...upload, fileSize: bytes.length + 1 });
    expect(otherSize.status).toBe(200);
    expect(otherSize.json).toMatchObject({ existing: false, fileSize: String(bytes.length + 1) });
    expect(otherSize.json.id).not.toBe(stack.sharedSample(SLIDE));
  });
});

/** Opens a job stream and resolves once the status line is in (the body stays open). */
function openStream(api: string, apiKey: string, jobId: string) {
  return new Promise<{ status: number; body: Promise<string>; close(): void }>((resolve, reject) => {
    const req = request(`${api}/jobs/${jobId}/stream`, { headers: { authorization: `Bearer ${apiKey}` } });
    req.on('error', reject);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      const body = new Promise<string>((done) => res.on('close', () => done(text)));
      resolve({ status: res.statusCode ?? 0, body, close: () => req.destroy() });
    });
    req.end();
  });
}

test('open job streams are capped per credential: 429 past the cap, a slot frees when one closes', async () => {
  const api = await stack.startApi({
    settings: { limits: { ...defaultTestSettings.limits, streamsPerCredential: 2 } },
  });
  try {
    const { organizationId, apiKey } = stack.tenant;
    const sampleId = await insertSample(stack.sql, { organizationId });
    const jobId = await insertJob(stack.sql, { organizationId, sampleId, status: 'running' });
    const first = await openStream(api.api, apiKey, jobId);
    const second = await openStream(api.api, apiKey, jobId);
    expect([first.status, second.status]).toEqual([200, 200]);

    const third = await openStream(api.api, apiKey, jobId);
    expect(third.status).toBe(429);
    const refusal = JSON.parse(await third.body);
    expect(refusal).toMatchObject({ error: 'rate_limited', retryAfterSeconds: expect.any(Number) });

    // Another credential has slots of its own.
    const other = await createTenant(stack.sql);
    const otherSample = await insertSample(stack.sql, { organizationId: other.organizationId });
    const otherJob = await insertJob(stack.sql, {
      organizationId: other.organizationId,
      sampleId: otherSample,
      status: 'running',
    });
    const foreign = await openStream(api.api, other.apiKey, otherJob);
    expect(foreign.status).toBe(200);
    foreign.close();

    // A closed stream gives its slot back (once the server has seen the close).
    const openWhenFree = async (job: string) => {
      let stream = await openStream(api.api, apiKey, job);
      for (let tries = 0; stream.status === 429 && tries < 50; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        stream = await openStream(api.api, apiKey, job);
      }
      return stream;
    };
    first.close();
    const again = await openWhenFree(jobId);
    expect(again.status).toBe(200);
    // A stream refused with 404 holds no slot after its answer.
    second.close();
    expect((await openWhenFree('00000000-0000-4000-8000-000000000000')).status).toBe(404);
    const last = await openStream(api.api, apiKey, jobId);
    expect(last.status).toBe(200);
    again.close();
    last.close();
  } finally {
    await api.close();
  }
});

test('authenticated answers carry nosniff and no-store: JSON, errors and file bytes', async () => {
  const sampleId = stack.sharedSample(SLIDE);
  const answers = [
    await call('GET', '/samples'),
    await call('GET', `/samples/${sampleId}`),
    await call('GET', '/samples/00000000-0000-4000-8000-000000000000'),
    await call('GET', `/samples/${sampleId}/he/files/zarr.json`),
    await apiClient(stack.api, 'sps_not_a_key')('GET', '/samples'),
  ];
  expect(answers.map((answer) => answer.status)).toEqual([200, 200, 404, 200, 401]);
  for (const answer of answers) {
    expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
    expect(answer.headers.get('cache-control')).toBe('no-store');
  }
});

test('a body with a __proto__ property is 400 at any depth, and nothing is written', async () => {
  const sampleId = stack.sharedSample(SLIDE);
  const before = await call('GET', `/samples/${sampleId}`);
  for (const body of [
    '{"fields":{"__proto__":{}}}',
    '{"fields":{"tags":["a"],"__proto__":{"tags":["b"]}}}',
    '{"__proto__":{"name":"x"},"name":"y"}',
  ]) {
    const answer = await call('PATCH', `/samples/${sampleId}`, body);
    expect({ body, status: answer.status, error: answer.json.error }).toEqual({
      body,
      status: 400,
      error: 'invalid_request',
    });
  }
  const upload = await call(
    'POST',
    '/uploads',
    '{"filename":"a.svs","fileSize":10,"contentType":"image/tiff","__proto__":{"autoSegment":true}}',
  );
  expect(upload.status).toBe(400);
  expect((await call('GET', `/samples/${sampleId}`)).json).toEqual(before.json);
});

describe('/metrics', () => {
  test('with METRICS_TOKEN, only that bearer token reads it (an API key does not)', async () => {
    const token = randomBytes(24).toString('hex');
    const api = await stack.startApi({ settings: { ...defaultTestSettings, metricsToken: token } });
    try {
      const read = (authorization?: string) =>
        fetch(`${api.baseUrl}/metrics`, { headers: authorization ? { authorization } : {} });
      for (const authorization of [undefined, 'Bearer wrong', `Bearer ${stack.tenant.apiKey}`, token]) {
        const answer = await read(authorization);
        expect({ authorization, status: answer.status }).toEqual({ authorization, status: 401 });
        expect(((await answer.json()) as { error: string }).error).toBe('unauthorized');
      }
      const granted = await read(`Bearer ${token}`);
      expect(granted.status).toBe(200);
      expect(await granted.text()).toContain('http_request_duration_seconds');
    } finally {
      await api.close();
    }
  });

  test('without a token, only loopback clients read it; another address gets 404', async () => {
    const external = Object.values(networkInterfaces())
      .flat()
      .find((address) => address && address.family === 'IPv4' && !address.internal);
    if (!external) throw new Error('this test needs a network interface other than loopback');
    const server = createServer(
      createApp({
        sql: stack.sql,
        store: stack.store,
        workflows: stack.workflows,
        logger: pino({ level: 'silent' }),
        settings: {
          ...defaultTestSettings,
          publicBaseUrl: stack.baseUrl,
          appUrl: 'https://app.example.test',
          signingSecret: stack.signingSecret,
        },
      }),
    );
    await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const local = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(local.status).toBe(200);
      const remote = await fetch(`http://${external.address}:${port}/metrics`);
      expect(remote.status).toBe(404);
      expect(((await remote.json()) as { error: string }).error).toBe('not_found');
      // The rest of the service answers that address as usual.
      expect((await fetch(`http://${external.address}:${port}/healthz`)).status).toBe(200);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

test('the sign-in, consent and OAuth error pages may not be framed', async () => {
  const clientId = await createOAuthClient(stack.sql);
  const config = await discover(stack, clientId);
  const [user] = await stack.sql<
    { email: string }[]
  >`SELECT email FROM users WHERE id = ${stack.tenant.userId}`;
  const email = user!.email;
  const password = await setPassword(stack.sql, email);
  const authorization = await authorizationUrl(config, stack, { scope: 'samples:read' });
  const browser = new Browser();
  const signIn = await browser.follow(authorization.url, stack.baseUrl);
  const consent = await browser.follow(formAction(signIn.text), stack.baseUrl, {
    form: { email, password },
  });
  expect(consent.text).toContain('Allow access');
  const unknownClient = new URL(authorization.url);
  unknownClient.searchParams.set('client_id', 'no-such-client');
  const errorPage = await new Browser().request(unknownClient.toString());
  expect(errorPage.status).toBe(400);
  for (const [page, headers] of [
    ['sign-in', signIn.headers],
    ['consent', consent.headers],
    ['error', errorPage.headers],
  ] as const) {
    expect({ page, frameOptions: headers.get('x-frame-options') }).toEqual({ page, frameOptions: 'DENY' });
    expect(headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
  }
});
