import { isStorageError, signToken, verifyObjectToken, verifyToken } from '../../../storage';

const secret = 'test-secret';
const now = new Date('2030-01-01T00:00:00.000Z');
const expiresAt = new Date(now.getTime() + 60_000);
const claims = { scope: 'object', subject: 'orgs/o1/a.bin', expiresAt };
const expected = { scope: 'object', subject: 'orgs/o1/a.bin' };

/** The tag of the StorageError that `check` throws, or 'ok'. */
const outcome = (check: () => unknown) => {
  try {
    check();
    return 'ok';
  } catch (err) {
    if (isStorageError(err)) return err._tag;
    throw err;
  }
};

/** Swaps one character of `text` at `index` for another of the base64url alphabet. */
const swapAt = (text: string, index: number) => {
  const at = index < 0 ? text.length + index : index;
  return text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1);
};

describe('signed tokens', () => {
  const token = signToken(secret, claims);

  test('a valid token verifies and returns its expiry', () => {
    expect(verifyToken(secret, token, expected, now)).toEqual({ expiresAt });
  });

  test('the token is URL-safe', () => {
    expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
  });

  test('a tampered payload is refused', () => {
    const [payload, signature] = token.split('.') as [string, string];
    const forged = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url').toString()), sub: 'orgs/o2/a.bin' }),
    ).toString('base64url');
    expect(
      outcome(() =>
        verifyToken(secret, `${forged}.${signature}`, { ...expected, subject: 'orgs/o2/a.bin' }, now),
      ),
    ).toBe('InvalidSignature');
    expect(outcome(() => verifyToken(secret, swapAt(token, 5), expected, now))).toBe('InvalidSignature');
  });

  test('a tampered signature is refused, including its last character', () => {
    expect(outcome(() => verifyToken(secret, swapAt(token, -5), expected, now))).toBe('InvalidSignature');
    // The last character of a 32-byte signature carries two spare bits; flipping one leaves the
    // decoded bytes unchanged, so a byte-wise comparison would accept this token.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const last = alphabet[alphabet.indexOf(token.at(-1) ?? '') ^ 1];
    const spareBitFlipped = token.slice(0, -1) + last;
    expect(Buffer.from(spareBitFlipped.split('.')[1]!, 'base64url')).toEqual(
      Buffer.from(token.split('.')[1]!, 'base64url'),
    );
    expect(outcome(() => verifyToken(secret, spareBitFlipped, expected, now))).toBe('InvalidSignature');
  });

  test('another secret, or a malformed token, is refused', () => {
    expect(outcome(() => verifyToken('other-secret', token, expected, now))).toBe('InvalidSignature');
    for (const bad of ['', '.', 'abc', `${token}.x`, `.${token.split('.')[1]}`]) {
      expect(outcome(() => verifyToken(secret, bad, expected, now))).toBe('InvalidSignature');
    }
  });

  test('a token for another subject is refused, even a prefix of it', () => {
    expect(outcome(() => verifyToken(secret, token, { ...expected, subject: 'orgs/o1/a.bin2' }, now))).toBe(
      'InvalidSignature',
    );
    expect(outcome(() => verifyToken(secret, token, { ...expected, subject: 'orgs/o1/a' }, now))).toBe(
      'InvalidSignature',
    );
  });

  test('a token for another scope is refused', () => {
    expect(outcome(() => verifyToken(secret, token, { ...expected, scope: 'upload' }, now))).toBe(
      'InvalidSignature',
    );
  });

  test('an expired token is refused from the instant it expires', () => {
    expect(outcome(() => verifyToken(secret, token, expected, new Date(expiresAt.getTime() - 1)))).toBe('ok');
    expect(outcome(() => verifyToken(secret, token, expected, expiresAt))).toBe('ExpiredSignature');
  });

  test('extra properties on the claims never reach the token', () => {
    const sneaky = { ...claims, exp: Number.MAX_SAFE_INTEGER, scope: 'object' };
    const later = new Date(expiresAt.getTime() + 1);
    expect(outcome(() => verifyToken(secret, signToken(secret, sneaky), expected, later))).toBe(
      'ExpiredSignature',
    );
  });

  test('an empty secret is a programming error', () => {
    expect(() => signToken('', claims)).toThrow(/secret/);
  });

  test('verifyObjectToken checks the object scope', () => {
    const objectToken = signToken(secret, { ...claims, expiresAt: new Date(Date.now() + 60_000) });
    expect(outcome(() => verifyObjectToken(secret, 'orgs/o1/a.bin', objectToken))).toBe('ok');
    const uploadToken = signToken(secret, {
      ...claims,
      scope: 'upload',
      expiresAt: new Date(Date.now() + 60_000),
    });
    expect(outcome(() => verifyObjectToken(secret, 'orgs/o1/a.bin', uploadToken))).toBe('InvalidSignature');
  });
});
