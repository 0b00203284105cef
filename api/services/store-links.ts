import {
  isStorageError,
  type ObjectInfo,
  type ObjectStore,
  signStoreToken,
  verifyStoreToken,
} from '../../storage';
import { AppError, notFound } from '../errors';
import { normaliseStorePath } from './jobs';
import { openStoredFile, type RangeOf, type StoredFile } from './store-files';

export interface StoreLinkDeps {
  store: ObjectStore;
  publicBaseUrl: string;
  signingSecret: string;
  now?: () => Date;
}

export interface StoreLink {
  /** `{PUBLIC_URL}/stores/{token}/zarr.json`: the store's root metadata. */
  url: string;
  expiresAt: Date;
}

/**
 * Signed whole-store links (DECISIONS.md "Signed store links"). The token sits in the path, so
 * a reader given only the link resolves every key of the store relative to it; it binds the
 * store's prefix and expiry. Both backends serve them here: an S3 presigned URL names one key
 * and cannot cover a prefix.
 */
export function createStoreLinks(deps: StoreLinkDeps) {
  const { store, signingSecret } = deps;
  const base = deps.publicBaseUrl.replace(/\/+$/, '');
  const now = deps.now ?? (() => new Date());

  /** A link to the store rooted at `prefix` (which ends in `/`), valid for `expiresInSeconds`. */
  function link(prefix: string, expiresInSeconds: number): StoreLink {
    const expiresAt = new Date(now().getTime() + expiresInSeconds * 1000);
    return { url: `${base}/stores/${signStoreToken(signingSecret, prefix, expiresAt)}/zarr.json`, expiresAt };
  }

  /**
   * Opens the key `path` of the store `token` grants: 403 for a bad or expired token, 404 for
   * a missing key or a path that leaves the store (`..`, absolute, encoded slashes included).
   */
  async function open(
    token: string,
    path: readonly string[],
    rangeOf: RangeOf,
    options: { bodiless?: (info: ObjectInfo) => boolean } = {},
  ): Promise<StoredFile & { expiresAt: Date }> {
    const granted = grant(token);
    const relative = normaliseStorePath(path);
    if (relative === undefined) throw notFound('file');
    const file = await openStoredFile(store, `${granted.prefix}${relative}`, rangeOf, options);
    return { ...file, expiresAt: granted.expiresAt };
  }

  function grant(token: string): { prefix: string; expiresAt: Date } {
    try {
      return verifyStoreToken(signingSecret, token, now());
    } catch (err) {
      if (isStorageError(err)) throw new AppError('forbidden', 'the link is invalid or has expired');
      throw err;
    }
  }

  return { link, open };
}

export type StoreLinks = ReturnType<typeof createStoreLinks>;
