import { createServer, type Server } from 'node:http';
import { SpsError } from '../../../sdk/errors';
import { refreshingCredential, type TokenSet } from '../../../sdk/oauth';
import { createTransport } from '../../../sdk/transport';

/**
 * The bearer that refreshes itself, against a real HTTP server that accepts one token at a
 * time: refresh before expiry, one refresh for concurrent callers, one retry after a 401.
 */
let server: Server;
let url: string;
let accepted = 'fresh';
const seen: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
    seen.push(token);
    if (token === accepted) return res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    res
      .writeHead(401, { 'content-type': 'application/json' })
      .end(JSON.stringify({ error: 'unauthorized', message: 'invalid, expired or foreign access token' }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/api/v1/ping`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));
beforeEach(() => {
  seen.length = 0;
  accepted = 'fresh';
});

const tokens = (accessToken: string, expiresInMs: number): TokenSet => ({
  accessToken,
  refreshToken: `refresh-of-${accessToken}`,
  expiresAt: Date.now() + expiresInMs,
  scope: 'samples:read',
});

function setUp(start: TokenSet, refresh: (current: TokenSet) => Promise<TokenSet>) {
  const heard: (TokenSet | null)[] = [];
  const refreshed: string[] = [];
  const credential = refreshingCredential({
    tokens: start,
    refresh: (current) => {
      refreshed.push(current.refreshToken!);
      return refresh(current);
    },
    onTokens: (next) => heard.push(next),
  });
  const transport = createTransport({
    baseUrl: url.replace('/api/v1/ping', ''),
    apiKey: credential.accessToken,
    onUnauthorized: credential.onUnauthorized,
  });
  return { transport, heard, refreshed };
}

test('a token about to expire is refreshed before the request, once for concurrent requests', async () => {
  const { transport, heard, refreshed } = setUp(tokens('old', 30_000), async () =>
    tokens('fresh', 3_600_000),
  );
  const answers = await Promise.all([1, 2, 3].map(() => transport.send({ method: 'GET', url })));
  expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200]);
  expect(refreshed).toEqual(['refresh-of-old']);
  expect(seen).toEqual(['fresh', 'fresh', 'fresh']);
  expect(heard.map((set) => set?.accessToken)).toEqual(['fresh']);
});

test('a 401 refreshes once and sends the request again with the new token', async () => {
  const { transport, refreshed } = setUp(tokens('revoked-early', 3_600_000), async () =>
    tokens('fresh', 3_600_000),
  );
  await expect(transport.send({ method: 'GET', url })).resolves.toMatchObject({ status: 200 });
  expect(seen).toEqual(['revoked-early', 'fresh']);
  expect(refreshed).toEqual(['refresh-of-revoked-early']);
});

test('a 401 after the refresh is the answer: no second refresh, no loop', async () => {
  accepted = 'nobody';
  const { transport, refreshed } = setUp(tokens('a', 3_600_000), async () => tokens('b', 3_600_000));
  const failure = await transport.send({ method: 'GET', url }).catch((err: unknown) => err);
  expect(failure).toMatchObject({ code: 'unauthorized', status: 401 });
  expect(seen).toEqual(['a', 'b']);
  expect(refreshed).toEqual(['refresh-of-a']);
});

test('a refused refresh signs out (onTokens null) and the 401 is what the caller gets', async () => {
  const { transport, heard } = setUp(tokens('spent', 3_600_000), async () => {
    throw new SpsError('oauth_failed', 'invalid_grant: grant request is invalid');
  });
  const failure = await transport.send({ method: 'GET', url }).catch((err: unknown) => err);
  expect(failure).toMatchObject({
    code: 'unauthorized',
    message: expect.stringContaining('invalid, expired or foreign access token'),
  });
  expect(heard).toEqual([null]);
});
