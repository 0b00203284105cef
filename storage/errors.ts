/** Tagged storage errors with one narrowing guard (zarrita style). */
export type StorageErrorTag = 'InvalidKey' | 'BackendUnavailable' | 'InvalidSignature' | 'ExpiredSignature';

export class StorageError extends Error {
  readonly _tag: StorageErrorTag;
  constructor(tag: StorageErrorTag, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this._tag = tag;
    this.name = `StorageError(${tag})`;
  }
}

export function isStorageError(err: unknown, tag?: StorageErrorTag): err is StorageError {
  return err instanceof StorageError && (tag === undefined || err._tag === tag);
}

/**
 * The `code` of a Node system error (`ENOENT`, `ECONNREFUSED`). Read by shape, not through
 * `instanceof Error`: errors raised inside Node's own modules may come from another realm (jest).
 */
export function systemErrorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  return typeof err.code === 'string' ? err.code : undefined;
}
