import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { createWorkflowEngine, type WorkflowEngine } from '../../api/workflow-engine';
import { runAdminCommand } from '../../cli/admin-commands';
import { createSql } from '../../db';
import { endpoints } from '../../schemas/endpoints';
import { apiClient } from '../support/http';
import { insertSample } from '../support/samples';
import { startStack, type TestStack } from '../support/stack';

let stack: TestStack;
let call: ReturnType<typeof apiClient>;

beforeAll(async () => {
  stack = await startStack();
  call = apiClient(stack.api, stack.tenant.apiKey);
});
afterAll(async () => {
  await stack?.close();
});

const validUpload = { filename: 'a.svs', fileSize: 100, contentType: 'image/tiff' };

describe('authentication', () => {
  test.each([
    ['no header', {}],
    ['not bearer', { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }],
    ['unknown key', { authorization: `Bearer sps_${'x'.repeat(43)}` }],
    ['garbage', { authorization: 'Bearer nope' }],
  ])('%s is 401 with the error body', async (_name, headers) => {
    const response = await fetch(`${stack.api}/uploads`, { headers });
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual({
      error: 'unauthorized',
      message: expect.any(String),
      required: null,
      retryAfterSeconds: null,
    });
  });

  test('a revoked key is 401', async () => {
    const key = await runAdminCommand(stack.sql, [
      'key',
      'create',
      '--org',
      stack.tenant.organizationId,
      '--user',
      stack.tenant.userId,
    ]);
    const client = apiClient(stack.api, String(key.apiKey));
    expect((await client('GET', '/uploads')).status).toBe(200);
    await runAdminCommand(stack.sql, ['key', 'revoke', '--id', String(key.keyId)]);
    expect((await client('GET', '/uploads')).status).toBe(401);
  });

  test('keys are stored only as hashes', async () => {
    const rows = await stack.sql`SELECT prefix, secret_sha256 FROM api_keys WHERE id = ${stack.tenant.keyId}`;
    expect(rows[0]!.prefix).toBe(stack.tenant.apiKey.slice(0, 12));
    expect(Buffer.from(rows[0]!.secret_sha256).toString('utf8')).not.toContain(stack.tenant.apiKey);
  });
});

describe('400 versus 422', () => {
  test('a body that is not JSON is 400', async () => {
    const response = await call('POST', '/uploads', '{not json', { 'content-type': 'application/json' });
    expect(response.status).toBe(400);
    expect(response.json.error).toBe('invalid_request');
  });
  test('an empty body is 400', async () => {
    expect((await call('POST', '/uploads', {})).json.error).toBe('invalid_request');
    expect((await call('POST', '/uploads')).status).toBe(400);
  });
  test('an unknown property is 400 and names it', async () => {
    const response = await call('POST', '/uploads', { ...validUpload, colour: 'red' });
    expect(response.status).toBe(400);
    expect(response.json.message).toContain("'colour'");
  });
  test('a known property with an invalid value is 422', async () => {
    for (const body of [
      { ...validUpload, fileSize: -1 },
      { ...validUpload, contentSha256: 'ABC' },
      { ...validUpload, mpp: { x: 0.25, y: 0.5 } },
      { ...validUpload, mpp: 101 },
      { ...validUpload, name: 'x'.repeat(201) },
      { ...validUpload, name: 'a\u0000b' },
    ]) {
      const response = await call('POST', '/uploads', body);
      expect(response.status).toBe(422);
      expect(response.json.error).toBe('validation_failed');
    }
  });
  test('a malformed id is 404', async () => {
    expect((await call('GET', '/uploads/not-a-uuid')).status).toBe(404);
  });
  test('an unknown endpoint is 404 with the error body', async () => {
    const response = await call('GET', '/nothing-here');
    expect(response.status).toBe(404);
    expect(response.json.error).toBe('not_found');
  });
});

describe('limits', () => {
  test('a JSON body over the limit is 413', async () => {
    const response = await call('POST', '/uploads', { ...validUpload, name: 'x'.repeat(100 * 1024) });
    expect(response.status).toBe(413);
    expect(response.json.error).toBe('payload_too_large');
  });
  test('a declared fileSize over the upload limit is 413', async () => {
    expect((await call('POST', '/uploads', { ...validUpload, fileSize: '99999999999999' })).status).toBe(413);
  });
  test('over the per-credential rate: 429 with retryAfterSeconds and Retry-After', async () => {
    const limited = await startStack({ limits: { ratePerSecond: 1, rateBurst: 3 } });
    try {
      const client = apiClient(limited.api, limited.tenant.apiKey);
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) statuses.push((await client('GET', '/uploads')).status);
      expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
      expect(statuses).toContain(429);
      const refused = await client('GET', '/uploads');
      expect(refused.json).toMatchObject({ error: 'rate_limited', retryAfterSeconds: expect.any(Number) });
      expect(Number(refused.headers.get('retry-after'))).toBe(refused.json.retryAfterSeconds);
      expect(refused.json.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    } finally {
      await limited.close();
    }
  });
});

describe('operations endpoints', () => {
  test('/healthz answers ok', async () => {
    expect(await (await fetch(`${stack.baseUrl}/healthz`)).json()).toEqual({ status: 'ok' });
  });
  test('/readyz checks the database and Temporal', async () => {
    const response = await fetch(`${stack.baseUrl}/readyz`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ok', checks: { database: 'ok', temporal: 'ok' } });
  });
  test('/readyz is 503 unavailable when the workflow engine is unreachable', async () => {
    const broken: WorkflowEngine = {
      startIngest: async () => {
        throw new Error('unreachable');
      },
      startRecount: async () => {
        throw new Error('unreachable');
      },
      startPrediction: async () => {
        throw new Error('unreachable');
      },
      cancelPrediction: async () => {
        throw new Error('unreachable');
      },
      workflowState: async () => {
        throw new Error('unreachable');
      },
      startSegmentation: async () => {
        throw new Error('unreachable');
      },
      startSegmentationMarkers: async () => {
        throw new Error('unreachable');
      },
      startExport: async () => {
        throw new Error('unreachable');
      },
      ping: async () => {
        throw new Error('connection refused');
      },
    };
    const degraded = await startStack({ workflows: () => broken });
    try {
      const response = await fetch(`${degraded.baseUrl}/readyz`);
      expect(response.status).toBe(503);
      const body = (await response.json()) as Record<string, unknown>;
      expect(body).toMatchObject({
        error: 'unavailable',
        checks: { database: 'ok', temporal: 'connection refused' },
      });
      expect(response.headers.get('retry-after')).toBe('5');
    } finally {
      await degraded.close();
    }
  });
  test('/metrics exposes request histograms in Prometheus format', async () => {
    await call('GET', '/uploads');
    const text = await (await fetch(`${stack.baseUrl}/metrics`)).text();
    expect(text).toMatch(
      /http_request_duration_seconds_count\{method="GET",route="\/api\/v1\/uploads",status="200"\} \d+/,
    );
    expect(text).toContain('process_resident_memory_bytes');
  });
  test('every response carries a request id, echoed when the caller sends one', async () => {
    const mine = await call('GET', '/uploads', undefined, { 'x-request-id': 'abc-123' });
    expect(mine.headers.get('x-request-id')).toBe('abc-123');
    expect((await call('GET', '/uploads')).headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('OpenAPI document', () => {
  test('is OpenAPI 3.1 and lists every endpoint of the endpoint table', async () => {
    const document = (await (await fetch(`${stack.api}/openapi.json`)).json()) as {
      openapi: string;
      paths: Record<string, Record<string, unknown>>;
    };
    expect(document.openapi).toBe('3.1.0');
    for (const endpoint of Object.values(endpoints)) {
      const path = 'root' in endpoint && endpoint.root ? endpoint.path : `/api/v1${endpoint.path}`;
      expect(document.paths[path]?.[endpoint.method]).toBeDefined();
    }
    // The older names Strand's clients call are marked deprecated, and nothing else is.
    const deprecated = Object.entries(document.paths).flatMap(([path, operations]) =>
      Object.entries(operations)
        .filter(([, operation]) => (operation as { deprecated?: boolean }).deprecated)
        .map(([method]) => `${method.toUpperCase()} ${path}`),
    );
    expect(deprecated.sort()).toEqual([
      'PATCH /api/v1/samples/retention',
      'PATCH /api/v1/samples/{id}/retention',
      'POST /api/v1/predict/estimate',
    ]);
  });
});

async function listenOn(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** A port nothing listens on: bound once, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  const port = await listenOn(server);
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const unavailableBody = {
  error: 'unavailable',
  message: expect.any(String),
  required: null,
  retryAfterSeconds: 5,
};

describe('outages', () => {
  test('database unreachable: an ordinary request is 503 unavailable with Retry-After', async () => {
    const sql = createSql(`postgres://nobody:nothing@127.0.0.1:${await closedPort()}/none`, { max: 1 });
    const server = await stack.startApi({ sql });
    try {
      const broken = apiClient(server.api, stack.tenant.apiKey);
      for (const path of ['/uploads', `/samples/${randomUUID()}`]) {
        const response = await broken('GET', path);
        expect(`${path} ${response.status}`).toBe(`${path} 503`);
        expect(response.json).toEqual(unavailableBody);
        expect(response.headers.get('retry-after')).toBe('5');
        expect(response.json.message).not.toContain('ECONNREFUSED');
      }
    } finally {
      await server.close();
      await sql.end();
    }
  });

  test('workflow engine unreachable: starting ingest is 503 unavailable; a PATCH recount keeps its own 500', async () => {
    // A client whose server does not exist, without the retry interceptor so it gives up at once.
    const connection = Connection.lazy({ address: '127.0.0.1:1', connectTimeout: 500, interceptors: [] });
    const dead = createWorkflowEngine(new Client({ connection }), { taskQueuePrefix: 'none' });
    const degraded = await startStack({ workflows: () => dead });
    try {
      const client = apiClient(degraded.api, degraded.tenant.apiKey);
      const stored = await insertSample(degraded.sql, {
        organizationId: degraded.tenant.organizationId,
        createdBy: degraded.tenant.userId,
        status: 'deid_running',
      });
      const complete = await client('POST', `/uploads/${stored}/complete`);
      expect(complete.status).toBe(503);
      expect(complete.json).toEqual(unavailableBody);
      expect(complete.headers.get('retry-after')).toBe('5');

      const ready = await insertSample(degraded.sql, {
        organizationId: degraded.tenant.organizationId,
        createdBy: degraded.tenant.userId,
        mppCalibrated: 0.5,
      });
      const patched = await client('PATCH', `/samples/${ready}`, { mpp: 0.25 });
      expect(patched.status).toBe(500);
      expect(patched.json.error).toBe('recount_enqueue_failed');
    } finally {
      await degraded.close();
      await connection.close().catch(() => {});
    }
  });
});
