import { isStorageError, signStoreToken, signToken, verifyStoreToken, verifyToken } from '../../../storage';

const secret = 'store-link-secret';
const prefix = 'orgs/o1/samples/s1/jobs/j1/';
const now = new Date('2030-01-01T00:00:00Z');
const expiresAt = new Date(now.getTime() + 3600_000);

function outcome(check: () => unknown): string {
  try {
    check();
    return 'valid';
  } catch (err) {
    return isStorageError(err) ? err._tag : 'other error';
  }
}

test('a store token grants its prefix until its expiry', () => {
  const token = signStoreToken(secret, prefix, expiresAt);
  expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
  expect(verifyStoreToken(secret, token, now)).toEqual({ prefix, expiresAt });
  expect(outcome(() => verifyStoreToken(secret, token, expiresAt))).toBe('ExpiredSignature');
});

test('another secret or a tampered token is refused', () => {
  const token = signStoreToken(secret, prefix, expiresAt);
  expect(outcome(() => verifyStoreToken('other', token, now))).toBe('InvalidSignature');
  const [payload, signature] = token.split('.') as [string, string];
  const forged = Buffer.from(JSON.stringify({ scope: 'store', sub: 'orgs/', exp: expiresAt.getTime() }));
  expect(outcome(() => verifyStoreToken(secret, `${forged.toString('base64url')}.${signature}`, now))).toBe(
    'InvalidSignature',
  );
  expect(outcome(() => verifyStoreToken(secret, `${payload}.${signature}x`, now))).toBe('InvalidSignature');
});

test('store and single-object tokens do not pass for each other', () => {
  const object = signToken(secret, { scope: 'object', subject: prefix, expiresAt });
  expect(outcome(() => verifyStoreToken(secret, object, now))).toBe('InvalidSignature');
  const store = signStoreToken(secret, prefix, expiresAt);
  expect(outcome(() => verifyToken(secret, store, { scope: 'object', subject: prefix }, now))).toBe(
    'InvalidSignature',
  );
});

test('only a valid store prefix, ending in "/", is signed', () => {
  for (const bad of ['orgs/o1/jobs/j1', '../', '/orgs/', 'orgs//j1/', 'orgs/../x/', '.tmp/']) {
    expect(() => signStoreToken(secret, bad, expiresAt)).toThrow();
  }
});
