import { connect, type Socket } from 'node:net';
import pino from 'pino';
import { loadConfig } from '../../cli/config';
import { freePort } from '../../cli/ports';
import { type RunningApi, startApi } from '../../cli/runtime';
import { apiClient } from '../support/http';
import { startStack, type TestStack } from '../support/stack';

/**
 * Clients that trickle bytes, or send none, against the API process as `sps api` starts it
 * (cli/runtime.ts startApi): they cannot hold a connection past the configured bounds, a
 * caller without a credential is refused before its body is read, one address cannot hold
 * more than its share of connections, and a swarm of 1,000 slow connections leaves a real
 * client's requests answered. The bounds are configured small; nothing asserts on time.
 */
let stack: TestStack;
let tight: RunningApi;
let capped: RunningApi;
const warnings: string[] = [];

const CAP = 50;

async function startTestApi(env: Record<string, string>): Promise<RunningApi> {
  const port = await freePort();
  const config = loadConfig({
    HOST: '127.0.0.1',
    PORT: String(port),
    TEMPORAL_TASK_QUEUE_PREFIX: stack.taskQueuePrefix,
    RATE_LIMIT_PER_SECOND: '1000',
    RATE_LIMIT_BURST: '10000',
    ...env,
  });
  const logger = pino(
    { level: 'warn' },
    {
      write: (line: string) => {
        warnings.push(line);
      },
    },
  );
  return startApi({
    config,
    sql: stack.sql,
    store: stack.store,
    client: stack.client,
    signingSecret: stack.signingSecret,
    logger,
  });
}

beforeAll(async () => {
  stack = await startStack();
  tight = await startTestApi({
    HTTP_HEADERS_TIMEOUT_MS: '500',
    HTTP_BODY_TIMEOUT_MS: '1000',
    HTTP_UPLOAD_IDLE_MS: '1000',
    HTTP_UPLOAD_MIN_BYTES: String(16 * 1024),
  });
  // Bounds far above the test's length: only the cap decides which connections stay.
  capped = await startTestApi({
    HTTP_HEADERS_TIMEOUT_MS: '120000',
    HTTP_BODY_TIMEOUT_MS: '120000',
    HTTP_MAX_CONNECTIONS_PER_ADDRESS: String(CAP),
  });
}, 60_000);
afterAll(async () => {
  await tight?.close();
  await capped?.close();
  await stack?.close();
});

interface RawConnection {
  socket: Socket;
  /** Everything the server sent, once it closed the connection. */
  closed: Promise<string>;
}

/** A TCP connection to `api` from `localAddress` (any 127.x address is this machine). */
function open(api: RunningApi, localAddress = '127.0.0.1'): Promise<RawConnection> {
  const { hostname, port } = new URL(api.url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port), localAddress });
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    const closed = new Promise<string>((done) => {
      socket.on('close', () => done(Buffer.concat(received).toString()));
    });
    socket.on('error', () => {});
    socket.once('connect', () => resolve({ socket, closed }));
    socket.once('error', reject);
  });
}

/** Writes `piece` every `everyMs` until the server closes the connection. */
function trickle(connection: RawConnection, piece: string | Buffer, everyMs: number): void {
  const timer = setInterval(() => {
    if (connection.socket.destroyed || connection.socket.writableEnded) clearInterval(timer);
    else connection.socket.write(piece);
  }, everyMs);
  void connection.closed.then(() => clearInterval(timer));
}

const statusOf = (answer: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
const errorOf = (answer: string) =>
  (JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { error: string }).error;

function head(api: RunningApi, method: string, path: string, headers: Record<string, string>): string {
  const lines = Object.entries({ host: new URL(api.url).host, ...headers }).map(
    ([name, value]) => `${name}: ${value}\r\n`,
  );
  return `${method} ${path} HTTP/1.1\r\n${lines.join('')}\r\n`;
}

test('without a credential, a trickled JSON body is refused before it is read: 401, connection closed', async () => {
  const connection = await open(tight);
  connection.socket.write(
    head(tight, 'POST', '/api/v1/uploads', { 'content-type': 'application/json', 'content-length': '100' }),
  );
  connection.socket.write('{');
  trickle(connection, ' ', 200);
  const answer = await connection.closed;
  expect(statusOf(answer)).toBe(401);
  expect(answer.toLowerCase()).toContain('connection: close');
  expect(errorOf(answer)).toBe('unauthorized');
});

test('with a credential, a JSON body still arriving after HTTP_BODY_TIMEOUT_MS is 408 request_timeout', async () => {
  const connection = await open(tight);
  connection.socket.write(
    head(tight, 'POST', '/api/v1/uploads', {
      authorization: `Bearer ${stack.tenant.apiKey}`,
      'content-type': 'application/json',
      'content-length': '100',
    }),
  );
  trickle(connection, ' ', 200);
  const answer = await connection.closed;
  expect(statusOf(answer)).toBe(408);
  expect(errorOf(answer)).toBe('request_timeout');
});

test('a body nobody reads (a GET that declares one) is cut after the answer, not read off forever', async () => {
  const connection = await open(tight);
  connection.socket.write(head(tight, 'GET', '/healthz', { 'content-length': '100' }));
  trickle(connection, 'a', 200);
  const answer = await connection.closed;
  expect(statusOf(answer)).toBe(200);
});

test('the sign-in form, which no credential can guard, is bounded the same way: 408', async () => {
  const connection = await open(tight);
  connection.socket.write(
    head(tight, 'POST', '/oauth2/interaction/some-uid/login', {
      'content-type': 'application/x-www-form-urlencoded',
      'content-length': '100',
    }),
  );
  trickle(connection, 'a', 200);
  const answer = await connection.closed;
  expect(statusOf(answer)).toBe(408);
  expect(errorOf(answer)).toBe('request_timeout');
});

test('headers trickled past HTTP_HEADERS_TIMEOUT_MS, or none at all: the connection is closed', async () => {
  const trickled = await open(tight);
  trickled.socket.write(`GET /healthz HTTP/1.1\r\nhost: ${new URL(tight.url).host}\r\n`);
  trickle(trickled, 'x-padding: a\r\n', 100);
  const silent = await open(tight);
  expect(statusOf(await trickled.closed)).toBe(408);
  expect(await silent.closed).toContain('408');
});

test('an upload chunk is bounded by progress, not total time: a steady slow chunk lands, a trickle is 408', async () => {
  const call = apiClient(`${tight.url}/api/v1`, stack.tenant.apiKey);
  const chunkBytes = 512 * 1024;
  const created = await call('POST', '/uploads', {
    filename: 'slow-link.svs',
    fileSize: 4 * chunkBytes,
    contentType: 'image/tiff',
  });
  expect(created.status).toBe(200);
  const session = new URL(created.json.uploadUrl as string);
  const chunkHead = (start: number) =>
    head(tight, 'PUT', `${session.pathname}${session.search}`, {
      'content-range': `bytes ${start}-${start + chunkBytes - 1}/${4 * chunkBytes}`,
      'content-length': String(chunkBytes),
    });

  // 64 KiB every 250 ms: two seconds in all (twice HTTP_BODY_TIMEOUT_MS), 16 times the floor.
  const steady = await open(tight);
  steady.socket.write(chunkHead(0));
  const piece = Buffer.alloc(64 * 1024, 7);
  for (let sent = 0; sent < chunkBytes; sent += piece.length) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    steady.socket.write(piece);
  }
  const landed = await new Promise<string>((resolve) => {
    let answer = '';
    steady.socket.on('data', (chunk: Buffer) => {
      answer += chunk.toString();
      if (answer.includes('\r\n\r\n')) resolve(answer);
    });
  });
  expect(statusOf(landed)).toBe(308);
  expect(landed.toLowerCase()).toContain(`range: bytes=0-${chunkBytes - 1}`);
  steady.socket.destroy();

  // 1 KiB every 200 ms: a third of the 16 KiB-per-second floor.
  const slow = await open(tight);
  slow.socket.write(chunkHead(chunkBytes));
  trickle(slow, Buffer.alloc(1024, 7), 200);
  const answer = await slow.closed;
  expect(statusOf(answer)).toBe(408);
  expect(errorOf(answer)).toBe('request_timeout');
  // The stored part is intact: the upload resumes where the steady chunk ended.
  expect((await call('GET', `/uploads/${created.json.id}`)).json.uploadedBytes).toBe(String(chunkBytes));
});

test('1,000 slow connections from 20 addresses are held, the cap refuses more, a real client is answered throughout', async () => {
  const addresses = Array.from({ length: 20 }, (_unused, index) => `127.0.0.${index + 2}`);
  const slow: RawConnection[] = [];
  for (const address of addresses) {
    for (let index = 0; index < CAP; index++) {
      const connection = await open(capped, address);
      // Half trickle their headers, half a sign-in form body: neither can be authenticated.
      if (index % 2 === 0) {
        connection.socket.write(`GET /healthz HTTP/1.1\r\nhost: ${new URL(capped.url).host}\r\n`);
        trickle(connection, 'x-padding: a\r\n', 1000);
      } else {
        connection.socket.write(
          head(capped, 'POST', '/oauth2/interaction/some-uid/login', {
            'content-type': 'application/x-www-form-urlencoded',
            'content-length': '100000',
          }),
        );
        trickle(connection, 'a', 1000);
      }
      slow.push(connection);
    }
  }
  // Over the cap: closed at once, before anything is read, and the client sees no answer.
  const refused = await Promise.all(Array.from({ length: 10 }, () => open(capped, addresses[0])));
  for (const connection of refused) expect(await connection.closed).toBe('');

  const call = apiClient(`${capped.url}/api/v1`, stack.tenant.apiKey);
  const statuses: number[] = [];
  for (let index = 0; index < 50; index++) statuses.push((await call('GET', '/samples')).status);
  expect(statuses).toEqual(Array(50).fill(200));

  // Every slow connection was still held while the real client was answered.
  expect(slow.filter((connection) => connection.socket.destroyed)).toHaveLength(0);
  expect(warnings.some((line) => line.includes('connection cap per address reached'))).toBe(true);
  for (const connection of slow) connection.socket.destroy();
  await Promise.all(slow.map((connection) => connection.closed));
}, 120_000);
