import { createHash, randomBytes } from 'node:crypto';

const API_KEY_PREFIX = 'sps_';
const API_KEY_PATTERN = /^sps_[A-Za-z0-9_-]{43}$/;

/** A new API key: the secret (shown once), its display prefix and the hash that is stored. */
export function generateApiKey(): { secret: string; prefix: string; secretSha256: Buffer } {
  const secret = `${API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
  return { secret, prefix: secret.slice(0, 12), secretSha256: hashApiKey(secret) };
}

// Keys carry 256 random bits, so a fast hash is enough: no password-style stretching needed.
export function hashApiKey(secret: string): Buffer {
  return createHash('sha256').update(secret).digest();
}

export function looksLikeApiKey(token: string): boolean {
  return API_KEY_PATTERN.test(token);
}
