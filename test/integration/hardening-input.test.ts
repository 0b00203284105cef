import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { apiClient } from '../support/http';
import { insertSampleWithResults, publish } from '../support/public-samples';
import { startStack, type TestStack } from '../support/stack';

/**
 * Bad input a careless client or an attacker sends is the client's mistake: a 4xx in the
 * contract's error body, never a 500. Malformed percent-encoding, a body whose
 * Content-Encoding lies, ranges that cannot be satisfied, NUL in text PostgreSQL cannot store.
 */
let stack: TestStack;
let ids: { sampleId: string; jobId: string; publicId: string };

beforeAll(async () => {
  stack = await startStack();
  const owned = await insertSampleWithResults(stack.sql, stack.store, {
    organizationId: stack.tenant.organizationId,
    createdBy: stack.tenant.userId,
  });
  ids = { sampleId: owned.sampleId, jobId: owned.jobId, publicId: await publish(stack.sql, owned.sampleId) };
  // The authorization server makes its signing key on first use.
  await fetch(`${stack.baseUrl}/oauth2/jwks`);
}, 60_000);
afterAll(async () => {
  await stack?.close();
});

interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** A request sent as written: the path is not normalized or re-encoded on the way. */
function raw(
  method: string,
  path: string,
  options: { headers?: Record<string, string>; body?: Buffer | string } = {},
): Promise<RawAnswer> {
  const { hostname, port } = new URL(stack.baseUrl);
  return new Promise((resolve, reject) => {
    const req = request({ hostname, port, method, path, headers: options.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          text: Buffer.concat(chunks).toString(),
        }),
      );
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

const bearer = () => ({ authorization: `Bearer ${stack.tenant.apiKey}` });
const errorOf = (answer: RawAnswer) => (JSON.parse(answer.text) as { error: string }).error;

test('malformed percent-encoding in a path is 400 invalid_request, with or without a credential', async () => {
  const layerId = randomUUID();
  const unauthenticated = [
    ['GET', '/files/%zz'],
    ['PUT', '/api/v1/upload-sessions/%zz?token=a'],
    ['GET', '/stores/%ff/zarr.json'],
  ];
  const bearerFileRoutes = [
    `/api/v1/jobs/${ids.jobId}/results/files/`,
    `/api/v1/samples/${ids.sampleId}/he/files/`,
    `/api/v1/samples/${ids.sampleId}/segmentation/${layerId}/files/`,
    `/api/v1/public/samples/${ids.publicId}/zarr/`,
  ].flatMap((prefix) => [`${prefix}%ff`, `${prefix}%c0%ae`, `${prefix}0/%c0%ae%c0%ae/zarr.json`]);
  const answers = [];
  for (const [method, path] of unauthenticated) answers.push({ path, answer: await raw(method!, path!) });
  for (const path of [...bearerFileRoutes, '/api/v1/samples/%ff', '/api/v1/jobs/%c0%ae']) {
    answers.push({ path, answer: await raw('GET', path, { headers: bearer() }) });
  }
  for (const { path, answer } of answers) {
    expect({ path, status: answer.status, error: errorOf(answer) }).toEqual({
      path,
      status: 400,
      error: 'invalid_request',
    });
  }
});

test('a malformed path on the authorization server is 400, not 500', async () => {
  const answer = await raw('GET', '/oauth2/auth/%ff');
  expect(answer.status).toBe(400);
});

test('a JSON body whose Content-Encoding is gzip, br or zstd but is not: 400 invalid_request', async () => {
  const body = JSON.stringify({ filename: 'a.svs', fileSize: 1000, contentType: 'image/tiff' });
  for (const encoding of ['gzip', 'deflate', 'br', 'zstd']) {
    const answer = await raw('POST', '/api/v1/uploads', {
      headers: { ...bearer(), 'content-type': 'application/json', 'content-encoding': encoding },
      body,
    });
    expect({ encoding, status: answer.status, error: errorOf(answer) }).toEqual({
      encoding,
      status: 400,
      error: 'invalid_request',
    });
  }
});

test('an unsatisfiable Range is 416 with Content-Range bytes */size, never the whole file', async () => {
  const call = apiClient(stack.api, stack.tenant.apiKey);
  const whole = await call('GET', `/jobs/${ids.jobId}/results/files/zarr.json`);
  expect(whole.status).toBe(200);
  const size = Buffer.byteLength(whole.text);
  const storeLink = (await call('GET', `/jobs/${ids.jobId}/results`)).json.resultUrl as string;
  const reads = [
    { name: 'bearer file route', url: `${stack.api}/jobs/${ids.jobId}/results/files/zarr.json`, auth: true },
    { name: 'signed store link', url: storeLink, auth: false },
  ];
  for (const { name, url, auth } of reads) {
    for (const range of ['bytes=-0', `bytes=${size}-`, `bytes=${size + 100}-${size + 200}`]) {
      const answer = await fetch(url, {
        headers: { range, ...(auth ? bearer() : {}) },
      });
      const body = (await answer.json()) as { error: string };
      expect({ name, range, status: answer.status, error: body.error }).toEqual({
        name,
        range,
        status: 416,
        error: 'range_not_satisfiable',
      });
      expect(answer.headers.get('content-range')).toBe(`bytes */${size}`);
    }
    // A satisfiable range still reads its bytes, a suffix larger than the file reads it all.
    const tail = await fetch(url, { headers: { range: 'bytes=-5', ...(auth ? bearer() : {}) } });
    expect(tail.status).toBe(206);
    expect(await tail.text()).toBe(whole.text.slice(-5));
    const all = await fetch(url, { headers: { range: `bytes=-${size + 10}`, ...(auth ? bearer() : {}) } });
    expect(all.status).toBe(206);
    expect(all.headers.get('content-range')).toBe(`bytes 0-${size - 1}/${size}`);
  }
});

test('NUL in a text property is 422 validation_failed on both expiration endpoints and elsewhere', async () => {
  const call = apiClient(stack.api, stack.tenant.apiKey);
  const single = await call(
    'PATCH',
    `/samples/${ids.sampleId}/expiration`,
    '{"neverExpire":true,"reason":"\\u0000"}',
  );
  expect({ status: single.status, error: single.json.error }).toEqual({
    status: 422,
    error: 'validation_failed',
  });
  expect(single.json.message).toContain('reason');
  const bulk = await call(
    'PATCH',
    '/samples/expiration',
    `{"sampleIds":["${ids.sampleId}"],"neverExpire":true,"reason":"a\\u0000b"}`,
  );
  expect({ status: bulk.status, error: bulk.json.error }).toEqual({
    status: 422,
    error: 'validation_failed',
  });
  const renamed = await call('PATCH', `/samples/${ids.sampleId}`, '{"name":"a\\u0000b"}');
  expect({ status: renamed.status, error: renamed.json.error }).toEqual({
    status: 422,
    error: 'validation_failed',
  });
  // Nothing was written by the refused calls.
  const detail = await call('GET', `/samples/${ids.sampleId}`);
  expect(detail.json).toMatchObject({ name: null });
  expect(detail.json.neverExpire ?? false).toBe(false);
});
