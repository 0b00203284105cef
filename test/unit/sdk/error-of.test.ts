import { networkError } from '../../../sdk/errors';
import { errorOf } from '../../../sdk/transport';

const answer = (status: number, body: string, type = 'text/html') =>
  new Response(body, { status, headers: { 'content-type': type } });

test("errorOf: the contract's error body gives its own code and message", async () => {
  const body = { error: 'recount_enqueue_failed', message: 'saved', required: null, retryAfterSeconds: null };
  const error = await errorOf(answer(500, JSON.stringify(body), 'application/json'));
  expect({ code: error.code, message: error.message, status: error.status }).toEqual({
    code: 'recount_enqueue_failed',
    message: 'saved',
    status: 500,
  });
});

test('errorOf: any other answer gets the generic code of its status, never a specific one', async () => {
  const cases: [number, string][] = [
    [400, 'invalid_request'],
    [401, 'unauthorized'],
    [403, 'forbidden'],
    [404, 'not_found'],
    [409, 'invalid_request'],
    [413, 'payload_too_large'],
    [429, 'rate_limited'],
    [500, 'internal'],
    [502, 'unavailable'],
    [503, 'unavailable'],
    [504, 'unavailable'],
    [507, 'internal'],
  ];
  for (const [status, code] of cases) {
    const error = await errorOf(answer(status, '<html>Bad Gateway</html>'));
    expect({ status, code: error.code, message: error.message }).toEqual({
      status,
      code,
      message: `HTTP ${status}: <html>Bad Gateway</html>`,
    });
  }
  // A JSON body that is not the contract's (a store's or a proxy's) is no error body either.
  const foreign = await errorOf(answer(403, '{"error":"AccessDenied"}', 'application/json'));
  expect(foreign.code).toBe('forbidden');
});

test("networkError: fetch's 'fetch failed' with its cause, which says what failed", () => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8099'), { code: 'ECONNREFUSED' });
  expect(
    networkError(
      'GET http://127.0.0.1:8099/api/v1/samples',
      new TypeError('fetch failed', { cause: refused }),
    ),
  ).toMatchObject({
    code: 'network',
    message: 'GET http://127.0.0.1:8099/api/v1/samples: fetch failed (connect ECONNREFUSED 127.0.0.1:8099)',
  });
  // Every address of a name refused: an AggregateError, whose message is empty but its code is not.
  const everyAddress = Object.assign(new AggregateError([], ''), { code: 'ECONNREFUSED' });
  expect(
    networkError('GET http://localhost:8099/', new TypeError('fetch failed', { cause: everyAddress }))
      .message,
  ).toBe('GET http://localhost:8099/: fetch failed (ECONNREFUSED)');
  // node:http's own error (the SDK's nodeFetch) is its own cause.
  expect(networkError('PUT http://127.0.0.1:8099/u', refused).message).toBe(
    'PUT http://127.0.0.1:8099/u: connect ECONNREFUSED 127.0.0.1:8099',
  );
});
