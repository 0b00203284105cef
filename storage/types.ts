import type { Readable } from 'node:stream';

/** A byte range: `offset` + `length`, or the last `suffixLength` bytes (zarrita's RangeQuery). */
export type RangeQuery = { offset: number; length: number } | { suffixLength: number };

export interface ObjectInfo {
  sizeBytes: number;
  lastModified: Date;
  contentType?: string;
}

/** One version of an object opened for streaming: its size and the span of it that `body` holds. */
export interface OpenedObject {
  body: Readable;
  info: ObjectInfo;
  range: { offset: number; length: number } | undefined;
}

export interface IoOptions {
  signal?: AbortSignal;
}

export interface WriteOptions extends IoOptions {
  contentType?: string;
}

export interface SignOptions {
  /** Lifetime of the link in seconds. */
  expiresInSeconds: number;
  /** Suggested download filename (Content-Disposition: attachment). */
  downloadName?: string;
}

/**
 * The one contract every backend keeps. Keys are relative, `/`-separated and validated by
 * `resolveKey`; a missing object reads as `undefined`, never as an error. `get`, `getRange`
 * and `put` are compute's `KeyValueStore` (compute/store.ts) method for method, so a backend
 * is handed to the Zarr writers and slide readers as it stands; storage imports nothing of
 * ours, so the match is structural and the compiler checks it where activities hand it over.
 */
export interface ObjectStore {
  readonly kind: 'fs' | 's3';
  get(key: string, options?: IoOptions): Promise<Uint8Array | undefined>;
  getRange(key: string, range: RangeQuery, options?: IoOptions): Promise<Uint8Array | undefined>;
  put(key: string, data: Uint8Array, options?: WriteOptions): Promise<void>;
  /** Streams an object of any size; memory stays flat. */
  read(key: string, options?: IoOptions & { range?: RangeQuery }): Promise<Readable | undefined>;
  /**
   * Streams one version of an object: `rangeOf` picks the span from that version's size, and
   * `info` describes that version, even when the object is replaced while it is being opened
   * (a stat then a read could answer the size of one version and the bytes of another).
   */
  open(
    key: string,
    options?: IoOptions & { rangeOf?: (size: number) => { offset: number; length: number } | undefined },
  ): Promise<OpenedObject | undefined>;
  /** Streams `body` into `key`; the object appears whole or not at all. */
  write(key: string, body: Readable, options?: WriteOptions): Promise<ObjectInfo>;
  stat(key: string, options?: IoOptions): Promise<ObjectInfo | undefined>;
  delete(key: string, options?: IoOptions): Promise<void>;
  /** Every key under `prefix`, in lexicographic order. */
  list(prefix: string, options?: IoOptions): AsyncIterable<string>;
  /** A URL that reads `key` without any other credential until it expires. */
  signedUrl(key: string, options: SignOptions): Promise<string>;
  /** Objects written chunk by chunk in place (the resumable upload), with no second copy. */
  readonly uploads: InPlaceUploads;
}

/** Where an in-place upload stands: opaque to the caller, who keeps it between chunks. */
export type UploadState = string;

/**
 * An object filled chunk by chunk, each stored where it belongs as it arrives, then published
 * whole at its key by `complete` without copying a byte, so completing takes the same time at
 * any size. Until then the key reads as it did before (the object appears whole or not at all).
 * `write` is durable when it answers; a repeated chunk stores the same bytes again; two writes
 * of the same chunk at once are safe; the caller orders chunks (each starts where the state
 * it passes ends) and keeps the state `write` answers once it has recorded the chunk.
 */
export interface InPlaceUploads {
  begin(key: string, options: { sizeBytes: number; contentType?: string }): Promise<UploadState>;
  write(state: UploadState, chunk: { offset: number; length: number; body: Readable }): Promise<UploadState>;
  /** Publishes the object; repeating it after it succeeded answers the same object. */
  complete(state: UploadState): Promise<ObjectInfo>;
  /** Drops every byte stored so far, leaving nothing behind; safe to repeat. */
  abort(state: UploadState): Promise<void>;
}
