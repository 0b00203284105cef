import { createHmac, timingSafeEqual } from 'node:crypto';
import { StorageError } from './errors';
import { resolvePrefix } from './keys';

/** What a token grants: one `scope` (e.g. 'object', 'upload') on one exact `subject`, until `expiresAt`. */
export interface TokenClaims {
  scope: string;
  subject: string;
  expiresAt: Date;
}

interface Payload {
  scope: string;
  sub: string;
  /** Milliseconds since the epoch, so `expiresAt` round-trips exactly. */
  exp: number;
}

function hmac(secret: string, data: string): string {
  // An empty key would make every token forgeable.
  if (secret === '') throw new Error('the signing secret is empty');
  return createHmac('sha256', secret).update(data).digest('base64url');
}

/**
 * `base64url(payload).base64url(hmac)`. The payload is built from the protected claims alone, so no
 * extra property on `claims` can reach it.
 */
export function signToken(secret: string, claims: TokenClaims): string {
  const exp = claims.expiresAt.getTime();
  if (!Number.isFinite(exp)) throw new RangeError('expiresAt is not a valid date');
  const payload: Payload = { scope: claims.scope, sub: claims.subject, exp };
  const encoded = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `${encoded}.${hmac(secret, encoded)}`;
}

/**
 * Compares the encoded text, not decoded bytes: base64url decoding ignores the spare bits of
 * the last character, so two different signature strings can decode to the same bytes.
 */
function sameText(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

function decodePayload(encoded: string): Payload | undefined {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const { scope, sub, exp } = value as Record<string, unknown>;
  if (typeof scope !== 'string' || typeof sub !== 'string' || typeof exp !== 'number') return undefined;
  return { scope, sub, exp };
}

function invalid(reason: string): StorageError {
  return new StorageError('InvalidSignature', `invalid token: ${reason}`);
}

/** Signature first, then scope and expiry: the claims of a token valid for `scope`. */
function readToken(secret: string, token: string, scope: string, now: Date): Payload {
  const [encoded, signature, ...rest] = token.split('.');
  if (encoded === undefined || signature === undefined || rest.length > 0) throw invalid('malformed');
  if (!sameText(signature, hmac(secret, encoded))) throw invalid('the signature does not match');
  const claims = decodePayload(encoded);
  if (claims === undefined) throw invalid('malformed claims');
  if (claims.scope !== scope) throw invalid(`it is not valid for ${scope}`);
  if (now.getTime() >= claims.exp) throw new StorageError('ExpiredSignature', 'the token has expired');
  return claims;
}

/** The one place a token is checked: signature first, then scope, exact subject and expiry. */
export function verifyToken(
  secret: string,
  token: string,
  expected: { scope: string; subject: string },
  now: Date = new Date(),
): { expiresAt: Date } {
  const claims = readToken(secret, token, expected.scope, now);
  if (claims.sub !== expected.subject) throw invalid('it was issued for another subject');
  return { expiresAt: new Date(claims.exp) };
}

const STORE_SCOPE = 'store';

/**
 * A whole-store token: it grants reading every key under `prefix` (a store root, ending in
 * `/`) until `expiresAt`. Its own scope, so no single-object or upload token passes for one.
 */
export function signStoreToken(secret: string, prefix: string, expiresAt: Date): string {
  if (!prefix.endsWith('/')) throw new RangeError('a store prefix ends with "/"');
  resolvePrefix(prefix);
  return signToken(secret, { scope: STORE_SCOPE, subject: prefix, expiresAt });
}

/** The store prefix a whole-store token grants, once its signature and expiry hold. */
export function verifyStoreToken(
  secret: string,
  token: string,
  now: Date = new Date(),
): { prefix: string; expiresAt: Date } {
  const claims = readToken(secret, token, STORE_SCOPE, now);
  return { prefix: claims.sub, expiresAt: new Date(claims.exp) };
}
