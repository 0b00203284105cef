import { StorageError } from './errors';

const MAX_KEY_BYTES = 1024;

/**
 * The fs backend stages writes in this top-level folder. It is reserved on every backend so that
 * a key valid on one backend is valid on all of them.
 */
export const STAGING_SEGMENT = '.tmp';

function keyProblem(key: string): string | undefined {
  if (key === '') return 'it is empty';
  if (Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES) return `it is longer than ${MAX_KEY_BYTES} bytes`;
  if (key.includes('\\')) return 'it contains a backslash';
  // NUL and other control characters break file names and S3's XML listings.
  if (/\p{Cc}/u.test(key)) return 'it contains a control character';
  // A lone surrogate has no UTF-8 form, so the key would not round-trip through S3.
  if (/\p{Surrogate}/u.test(key)) return 'it is not well-formed Unicode';
  if (key.startsWith('/')) return 'it is absolute';
  const segments = key.split('/');
  if (segments.includes('')) return 'it has an empty segment';
  if (segments.includes('.') || segments.includes('..')) return 'it has a "." or ".." segment';
  if (segments[0] === STAGING_SEGMENT) return `"${STAGING_SEGMENT}/" is reserved`;
  return undefined;
}

/** The one check every key passes before a backend touches it; path traversal stops here. */
export function resolveKey(key: string): string {
  const problem = keyProblem(key);
  if (problem !== undefined) {
    throw new StorageError(
      'InvalidKey',
      `invalid object key ${JSON.stringify(key.slice(0, 200))}: ${problem}`,
    );
  }
  return key;
}

/** A `list` prefix: empty, or a valid key optionally followed by `/`. */
export function resolvePrefix(prefix: string): string {
  if (prefix !== '') resolveKey(prefix.endsWith('/') ? prefix.slice(0, -1) : prefix);
  return prefix;
}
