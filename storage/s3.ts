import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  type CompletedPart,
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { StorageError } from './errors';
import { resolveKey, resolvePrefix, STAGING_SEGMENT } from './keys';
import { rangeHeader } from './range';
import { completedPart, createS3Uploads } from './s3-uploads';
import type { IoOptions, ObjectInfo, ObjectStore, OpenedObject, RangeQuery, WriteOptions } from './types';

export interface S3StoreOptions {
  /** Leave unset for AWS; set for MinIO and other S3-compatible servers. */
  endpoint?: string;
  region: string;
  bucket: string;
  /** Leave both unset to use the SDK's default credential chain. */
  accessKeyId?: string;
  secretAccessKey?: string;
  forcePathStyle: boolean;
  /** Every key is stored under this folder of the bucket. */
  prefix?: string;
}

/** Opens of an object replaced each time between its HEAD and its GET, before giving up. */
const OPEN_ATTEMPTS = 5;

/** Parts of a streamed write; S3 wants at least 5 MiB per part but the last. */
const PART_BYTES = 8 * 1024 * 1024;

/**
 * Connection-level: S3 never answered. The SDK stamps `$metadata` on every error that went through
 * its send pipeline, with an HTTP status only when a response arrived; aborts and credential
 * errors carry none. Node's `code` is not enough on its own: the SDK re-wraps errors that fail
 * its `instanceof Error` check (Node's own, under jest's separate realm) and the code is lost.
 */
function isConnectionFailure(err: unknown): boolean {
  if (typeof err !== 'object' || err === null || !('$metadata' in err)) return false;
  const metadata = err.$metadata;
  if (typeof metadata !== 'object' || metadata === null) return false;
  return !('httpStatusCode' in metadata) || metadata.httpStatusCode === undefined;
}

/** Connection failures become `BackendUnavailable`; every other error keeps its SDK shape. */
function translate(err: unknown): never {
  if (isConnectionFailure(err)) {
    throw new StorageError('BackendUnavailable', 'the S3 endpoint cannot be reached', { cause: err });
  }
  throw err;
}

function hasStatus(err: unknown, status: number): err is S3ServiceException {
  return err instanceof S3ServiceException && err.$metadata.httpStatusCode === status;
}

/** A missing key reads as `undefined`; a missing bucket is a misconfiguration and stays an error. */
function missingAsUndefined(err: unknown): undefined {
  if (hasStatus(err, 404) && err.name !== 'NoSuchBucket') return undefined;
  return translate(err);
}

function toBuffer(chunk: unknown): Buffer {
  if (Buffer.isBuffer(chunk)) return chunk;
  if (chunk instanceof Uint8Array) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (typeof chunk === 'string') return Buffer.from(chunk);
  throw new TypeError('write expects a stream of bytes');
}

/** Re-cuts a byte stream into `size`-byte parts (the last may be shorter), one part in memory at a time. */
async function* partsOf(body: Readable, size: number): AsyncGenerator<Buffer, void, undefined> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  for await (const chunk of body) {
    const bytes = toBuffer(chunk);
    pending.push(bytes);
    pendingBytes += bytes.length;
    while (pendingBytes >= size) {
      const joined = Buffer.concat(pending, pendingBytes);
      yield joined.subarray(0, size);
      const rest = Buffer.from(joined.subarray(size));
      pending = rest.length > 0 ? [rest] : [];
      pendingBytes = rest.length;
    }
  }
  if (pendingBytes > 0) yield Buffer.concat(pending, pendingBytes);
}

/** RFC 6266 `attachment` with an RFC 5987 UTF-8 filename. */
function attachment(filename: string): string {
  const encoded = encodeURIComponent(filename).replace(
    /['()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `attachment; filename*=UTF-8''${encoded}`;
}

function createClient(options: S3StoreOptions): S3Client {
  const { endpoint, region, forcePathStyle, accessKeyId, secretAccessKey } = options;
  const credentials =
    accessKeyId !== undefined && secretAccessKey !== undefined ? { accessKeyId, secretAccessKey } : undefined;
  // No `Expect: 100-continue`: the SDK adds it to bodies of 2 MB and more, and sends each such
  // request on a fresh connection that it closes after (every upload part a new TCP, and on
  // AWS TLS, handshake) and only after a round trip for the server's 100.
  // Checksums only where asked: a body in memory is already signed with its SHA-256, which the
  // server checks; a streamed upload part asks for its CRC32 itself (s3-uploads.ts).
  return new S3Client({
    endpoint,
    region,
    forcePathStyle,
    credentials,
    expectContinueHeader: false,
    requestChecksumCalculation: 'WHEN_REQUIRED',
  });
}

function normalizePrefix(prefix: string | undefined): string {
  const trimmed = (prefix ?? '').replace(/\/+$/, '');
  return trimmed === '' ? '' : `${resolveKey(trimmed)}/`;
}

/** Creates the bucket unless it exists (tests and `npm start` against a fresh MinIO). */
export async function ensureBucket(options: S3StoreOptions): Promise<void> {
  const client = createClient(options);
  const Bucket = options.bucket;
  try {
    const exists = await client.send(new HeadBucketCommand({ Bucket })).then(
      () => true,
      (err: unknown) => (hasStatus(err, 404) ? false : translate(err)),
    );
    if (exists) return;
    await client.send(new CreateBucketCommand({ Bucket })).catch((err: unknown) => {
      // Another process created it between the two calls.
      if (err instanceof S3ServiceException && err.name === 'BucketAlreadyOwnedByYou') return;
      translate(err);
    });
  } finally {
    client.destroy();
  }
}

export function createS3Store(options: S3StoreOptions): ObjectStore {
  const client = createClient(options);
  const Bucket = options.bucket;
  const basePrefix = normalizePrefix(options.prefix);
  const objectKey = (key: string) => basePrefix + resolveKey(key);
  // In-place uploads keep their small chunks here; no object key can reach it.
  const stagingPrefix = `${basePrefix}${STAGING_SEGMENT}/uploads/`;

  /** The object's body; `'empty'` when the range starts past the end, `undefined` when there is no object. */
  async function getObject(key: string, signal: AbortSignal | undefined, range?: RangeQuery) {
    const Key = objectKey(key);
    const Range = range && rangeHeader(range);
    try {
      const output = await client.send(new GetObjectCommand({ Bucket, Key, Range }), { abortSignal: signal });
      return output.Body;
    } catch (err) {
      // S3 answers 416 for a range past the end, which the fs backend reads as no bytes.
      if (range && hasStatus(err, 416)) return 'empty' as const;
      return missingAsUndefined(err);
    }
  }

  async function stat(key: string, { signal }: IoOptions = {}): Promise<ObjectInfo | undefined> {
    const output = await client
      .send(new HeadObjectCommand({ Bucket, Key: objectKey(key) }), { abortSignal: signal })
      .catch(missingAsUndefined);
    if (!output) return undefined;
    return {
      sizeBytes: output.ContentLength ?? 0,
      lastModified: output.LastModified ?? new Date(0),
      contentType: output.ContentType,
    };
  }

  /**
   * HEAD for the size `rangeOf` needs, then a GET of that version only (`If-Match` its ETag): an
   * object replaced between the two answers 412 and is opened again.
   */
  async function openObject(
    key: string,
    { signal, rangeOf }: Parameters<ObjectStore['open']>[1] = {},
  ): Promise<OpenedObject | undefined> {
    for (let attempt = 1; ; attempt++) {
      const head = await client
        .send(new HeadObjectCommand({ Bucket, Key: objectKey(key) }), { abortSignal: signal })
        .catch(missingAsUndefined);
      if (!head) return undefined;
      const info: ObjectInfo = {
        sizeBytes: head.ContentLength ?? 0,
        lastModified: head.LastModified ?? new Date(0),
        contentType: head.ContentType,
      };
      const range = rangeOf?.(info.sizeBytes);
      const Range = range && rangeHeader(range);
      try {
        const output = await client.send(
          new GetObjectCommand({ Bucket, Key: objectKey(key), Range, IfMatch: head.ETag }),
          { abortSignal: signal },
        );
        if (!(output.Body instanceof Readable)) throw new Error('the S3 client returned a non-Node body');
        return { body: output.Body, info, range };
      } catch (err) {
        if (hasStatus(err, 412) && attempt < OPEN_ATTEMPTS) continue;
        if (range && hasStatus(err, 416)) return { body: Readable.from([]), info, range };
        return missingAsUndefined(err);
      }
    }
  }

  async function putObject(Key: string, Body: Uint8Array, { signal, contentType }: WriteOptions) {
    await client
      .send(new PutObjectCommand({ Bucket, Key, Body, ContentType: contentType }), { abortSignal: signal })
      .catch(translate);
  }

  async function uploadParts(
    Key: string,
    UploadId: string,
    first: Buffer,
    rest: AsyncGenerator<Buffer, void, undefined>,
    signal: AbortSignal | undefined,
  ): Promise<CompletedPart[]> {
    const upload = async (Body: Buffer, PartNumber: number): Promise<CompletedPart> => {
      const command = new UploadPartCommand({ Bucket, Key, UploadId, PartNumber, Body });
      return completedPart(PartNumber, await client.send(command, { abortSignal: signal }).catch(translate));
    };
    const completed = [await upload(first, 1)];
    for await (const part of rest) completed.push(await upload(part, completed.length + 1));
    return completed;
  }

  async function uploadMultipart(
    Key: string,
    first: Buffer,
    rest: AsyncGenerator<Buffer, void, undefined>,
    { signal, contentType }: WriteOptions,
  ): Promise<void> {
    const created = await client
      .send(new CreateMultipartUploadCommand({ Bucket, Key, ContentType: contentType }), {
        abortSignal: signal,
      })
      .catch(translate);
    const UploadId = created.UploadId;
    if (!UploadId) throw new Error('S3 returned no multipart upload id');
    try {
      const Parts = await uploadParts(Key, UploadId, first, rest, signal);
      await client
        .send(new CompleteMultipartUploadCommand({ Bucket, Key, UploadId, MultipartUpload: { Parts } }), {
          abortSignal: signal,
        })
        .catch(translate);
    } catch (err) {
      // Best effort: the write's own error is the one to report, and a bucket lifecycle rule
      // reaps uploads that an abort could not reach.
      await client.send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId })).catch(() => undefined);
      throw err;
    }
  }

  async function writeObject(key: string, body: Readable, options: WriteOptions): Promise<void> {
    const Key = objectKey(key);
    const parts = partsOf(body, PART_BYTES);
    const first = await parts.next();
    // A stream that fits in one part needs no multipart upload.
    if (first.done || first.value.length < PART_BYTES) {
      await putObject(Key, first.done ? new Uint8Array() : first.value, options);
      return;
    }
    await uploadMultipart(Key, first.value, parts, options);
  }

  return {
    kind: 's3',

    async get(key, { signal } = {}) {
      const body = await getObject(key, signal);
      return body === 'empty' ? new Uint8Array() : body?.transformToByteArray();
    },

    async getRange(key, range, { signal } = {}) {
      const body = await getObject(key, signal, range);
      return body === 'empty' ? new Uint8Array() : body?.transformToByteArray();
    },

    async put(key, data, options = {}) {
      await putObject(objectKey(key), data, options);
    },

    async read(key, { signal, range } = {}) {
      const body = await getObject(key, signal, range);
      if (body === 'empty') return Readable.from([]);
      if (body === undefined) return undefined;
      if (!(body instanceof Readable)) throw new Error('the S3 client returned a non-Node body');
      return body;
    },

    async write(key, body, options = {}) {
      try {
        await writeObject(key, body, options);
      } catch (err) {
        body.destroy();
        throw err;
      }
      const info = await stat(key, options);
      if (!info) throw new Error(`object ${key} vanished right after it was written`);
      return info;
    },

    open: openObject,

    stat,

    async delete(key, { signal } = {}) {
      await client
        .send(new DeleteObjectCommand({ Bucket, Key: objectKey(key) }), { abortSignal: signal })
        .catch(translate);
    },

    async *list(prefix, { signal } = {}) {
      const Prefix = basePrefix + resolvePrefix(prefix);
      let ContinuationToken: string | undefined;
      do {
        const page = await client
          .send(new ListObjectsV2Command({ Bucket, Prefix, ContinuationToken }), { abortSignal: signal })
          .catch(translate);
        for (const object of page.Contents ?? []) {
          if (object.Key !== undefined && !object.Key.startsWith(stagingPrefix))
            yield object.Key.slice(basePrefix.length);
        }
        ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (ContinuationToken !== undefined);
    },

    async signedUrl(key, { expiresInSeconds, downloadName }) {
      const command = new GetObjectCommand({
        Bucket,
        Key: objectKey(key),
        ResponseContentDisposition: downloadName === undefined ? undefined : attachment(downloadName),
      });
      return getSignedUrl(client, command, { expiresIn: expiresInSeconds });
    },

    uploads: createS3Uploads({ client, Bucket, objectKey, stagingPrefix, stat, translate }),
  };
}
