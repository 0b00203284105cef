import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  type CompletedPart,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutObjectCommand,
  type S3Client,
  S3ServiceException,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import type { InPlaceUploads, ObjectInfo } from './types';
import { type BaseUploadState, checkChunk, decodeState, encodeState, exactly } from './upload-state';

const MiB = 1024 * 1024;
/** S3's least part but the last, and its most parts in one upload. */
const MIN_PART_BYTES = 5 * MiB;
const MAX_PARTS = 10_000;
/**
 * A chunk is sent as parts of about this size, so that S3 stores one while the next arrives
 * and only the last part's storing is left after the chunk's last byte.
 */
const SUB_PART_BYTES = 16 * MiB;
/** Parts of one chunk sent and not yet answered at once. */
const PARTS_IN_FLIGHT = 4;

interface S3UploadState extends BaseUploadState {
  contentType?: string;
  /** The multipart upload; none for an empty object, which is one plain put. */
  uploadId: string | null;
  /** Names the folder of this upload's pieces. */
  staging: string;
  /** The least a part holds (but the last), so that the upload fits S3's part count. */
  partBytes: number;
  /** Parts 1..parts hold the bytes before the first piece. */
  parts: number;
  /** Offsets of the pieces: chunks too small for a part on their own, held until one fills. */
  pieces: number[];
  /** Pieces that went into the latest part; deleted once the caller has recorded it. */
  spent: number[];
}

export interface S3UploadsContext {
  client: S3Client;
  Bucket: string;
  /** The bucket key of an object key. */
  objectKey: (key: string) => string;
  /** Bucket prefix of the pieces' folders, out of the reach of object keys. */
  stagingPrefix: string;
  stat: (key: string) => Promise<ObjectInfo | undefined>;
  translate: (err: unknown) => never;
}

function isNoSuchUpload(err: unknown): boolean {
  return (
    err instanceof S3ServiceException && (err.name === 'NoSuchUpload' || err.$metadata.httpStatusCode === 404)
  );
}

async function collect(chunks: AsyncIterable<Buffer>): Promise<Buffer> {
  const all: Buffer[] = [];
  for await (const chunk of chunks) all.push(chunk);
  return Buffer.concat(all);
}

/**
 * The sizes of the parts that `total` bytes are sent as: as many of `size` bytes as fit, the
 * first taking the rest (so every part but a lone one holds at least `size`, and the last,
 * whose storing is awaited after the last byte, is no larger than the others). The same bytes
 * always split the same way, so a chunk sent again rewrites the same parts.
 */
export function partSizes(total: number, size: number): number[] {
  const count = Math.max(1, Math.floor(total / size));
  return [total - (count - 1) * size, ...Array.from({ length: count - 1 }, () => size)];
}

/**
 * Cuts `body` into consecutive spans: each `take(length)` streams the next `length` bytes, and
 * the last span also reads on to the end of `body`, so that its checks (a body too long)
 * still run. Spans are taken one after the other, never at once.
 */
function spans(body: AsyncIterable<Buffer>) {
  const iterator = body[Symbol.asyncIterator]();
  let rest: Buffer | undefined;
  return async function* take(length: number, last: boolean): AsyncGenerator<Buffer, void, undefined> {
    let left = length;
    while (left > 0) {
      let piece = rest;
      rest = undefined;
      if (piece === undefined) {
        const next = await iterator.next();
        if (next.done) return;
        piece = next.value;
      }
      if (piece.length > left) {
        rest = piece.subarray(left);
        piece = piece.subarray(0, left);
      }
      left -= piece.length;
      yield piece;
    }
    if (last && !(await iterator.next()).done)
      throw new Error(`the bytes run past their ${length}-byte part`);
  };
}

/**
 * A multipart upload: a chunk of at least `partBytes` (or the last) becomes parts of about
 * `SUB_PART_BYTES` as it streams in; smaller chunks wait as piece objects until they and the
 * chunk that fills the group are sent together. The server joins the parts when the upload
 * completes.
 */
export function createS3Uploads(context: S3UploadsContext): InPlaceUploads {
  const { client, Bucket, translate } = context;
  const folderOf = (state: S3UploadState) => `${context.stagingPrefix}${state.staging}/`;
  const pieceKey = (state: S3UploadState, offset: number) =>
    `${folderOf(state)}${String(offset).padStart(16, '0')}`;

  async function* pieceBytes(state: S3UploadState): AsyncGenerator<Buffer, void, undefined> {
    for (const offset of state.pieces) {
      const output = await client
        .send(new GetObjectCommand({ Bucket, Key: pieceKey(state, offset) }))
        .catch(translate);
      yield* output.Body as Readable;
    }
  }

  /**
   * Sends one part; `streamed` answers true once its last byte is handed to the client, false
   * when the send failed first; `answered` once S3 has stored the part. `abort` stops a part still
   * streaming; one whose bytes are all sent is left to finish, so that no part lands after
   * `write` has answered.
   */
  function sendPart(state: S3UploadState, PartNumber: number, body: AsyncIterable<Buffer>, length: number) {
    // A body that fails (its client went away) aborts the send instead of failing the stream:
    // the SDK re-emits a stream's error on a stream of its own that nothing listens to.
    const abort = new AbortController();
    let failure: unknown;
    let allSent = false;
    let onStreamed = (_sent: boolean) => {};
    const streamed = new Promise<boolean>((resolve) => {
      onStreamed = resolve;
    });
    const guarded = async function* () {
      try {
        yield* body;
        allSent = true;
      } catch (err) {
        failure = err;
        abort.abort(err);
      }
      onStreamed(allSent);
    };
    const command = new UploadPartCommand({
      Bucket,
      Key: context.objectKey(state.key),
      UploadId: state.uploadId!,
      PartNumber,
      ContentLength: length,
      // A streamed body is sent unsigned: its CRC32, in a trailer, is what S3 checks it against.
      ChecksumAlgorithm: 'CRC32',
      Body: Readable.from(guarded()),
    });
    const answered = client.send(command, { abortSignal: abort.signal }).then(
      () => undefined,
      (err: unknown) => {
        onStreamed(false);
        if (failure !== undefined) throw failure;
        return translate(err);
      },
    );
    const stop = (reason: unknown) => {
      if (!allSent) abort.abort(reason);
    };
    return { streamed, answered, stop };
  }

  /**
   * Sends `bytes` as parts of the given sizes, numbered on from the recorded ones: each part
   * starts as soon as the one before it has all its bytes sent, so S3 stores a part while the
   * next still arrives, and only the last part's answer is awaited after the last byte.
   * Answers once every part is stored; on a failure, once none can land any more.
   */
  async function sendParts(state: S3UploadState, bytes: AsyncIterable<Buffer>, sizes: number[]) {
    const take = spans(bytes);
    const answers: Promise<void>[] = [];
    const waiting = new Set<Promise<void>>();
    let failure: { err: unknown } | undefined;
    let streaming: ReturnType<typeof sendPart> | undefined;
    for (const [index, size] of sizes.entries()) {
      while (failure === undefined && waiting.size >= PARTS_IN_FLIGHT) await Promise.race(waiting);
      if (failure !== undefined) break;
      const part = sendPart(state, state.parts + 1 + index, take(size, index === sizes.length - 1), size);
      streaming = part;
      const settled: Promise<void> = part.answered.then(
        () => {
          waiting.delete(settled);
        },
        (err: unknown) => {
          waiting.delete(settled);
          failure ??= { err };
          streaming?.stop(err);
        },
      );
      answers.push(settled);
      waiting.add(settled);
      const sent = await Promise.race([part.streamed, settled.then(() => false)]);
      streaming = undefined;
      if (!sent) break;
    }
    await Promise.all(answers);
    if (failure !== undefined) throw failure.err;
    if (answers.length !== sizes.length) throw new Error('a part stopped before its last byte');
  }

  async function deletePieces(state: S3UploadState, offsets: number[]): Promise<void> {
    await Promise.all(
      offsets.map((offset) =>
        client.send(new DeleteObjectCommand({ Bucket, Key: pieceKey(state, offset) })).catch(translate),
      ),
    );
  }

  /** Every piece left in the folder, recorded or not (a chunk written but never recorded). */
  async function sweep(state: S3UploadState): Promise<void> {
    let ContinuationToken: string | undefined;
    do {
      const page = await client
        .send(new ListObjectsV2Command({ Bucket, Prefix: folderOf(state), ContinuationToken }))
        .catch(translate);
      await Promise.all(
        (page.Contents ?? []).map(({ Key }) =>
          client.send(new DeleteObjectCommand({ Bucket, Key })).catch(translate),
        ),
      );
      ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (ContinuationToken !== undefined);
  }

  async function recordedParts(state: S3UploadState): Promise<CompletedPart[]> {
    const parts: CompletedPart[] = [];
    let PartNumberMarker: string | undefined;
    do {
      const page = await client
        .send(
          new ListPartsCommand({
            Bucket,
            Key: context.objectKey(state.key),
            UploadId: state.uploadId!,
            PartNumberMarker,
          }),
        )
        .catch(translate);
      for (const part of page.Parts ?? []) {
        // A part past the recorded ones was sent by a chunk that was never recorded.
        if (part.PartNumber! <= state.parts) parts.push(completedPart(part.PartNumber!, part));
      }
      PartNumberMarker = page.IsTruncated ? page.NextPartNumberMarker : undefined;
    } while (PartNumberMarker !== undefined);
    return parts.sort((a, b) => a.PartNumber! - b.PartNumber!);
  }

  async function publish(state: S3UploadState): Promise<void> {
    if (state.uploadId === null) {
      await client
        .send(
          new PutObjectCommand({
            Bucket,
            Key: context.objectKey(state.key),
            Body: new Uint8Array(),
            ContentType: state.contentType,
          }),
        )
        .catch(translate);
      return;
    }
    const Parts = await recordedParts(state);
    await client
      .send(
        new CompleteMultipartUploadCommand({
          Bucket,
          Key: context.objectKey(state.key),
          UploadId: state.uploadId,
          MultipartUpload: { Parts },
        }),
      )
      .catch(translate);
  }

  return {
    async begin(key, { sizeBytes, contentType }) {
      const Key = context.objectKey(key);
      const created =
        sizeBytes === 0
          ? undefined
          : await client
              .send(new CreateMultipartUploadCommand({ Bucket, Key, ContentType: contentType }))
              .catch(translate);
      if (created && !created.UploadId) throw new Error('S3 returned no multipart upload id');
      const state: S3UploadState = {
        key,
        sizeBytes,
        offset: 0,
        contentType,
        uploadId: created?.UploadId ?? null,
        staging: randomUUID(),
        partBytes: Math.max(MIN_PART_BYTES, Math.ceil(sizeBytes / MAX_PARTS)),
        parts: 0,
        pieces: [],
        spent: [],
      };
      return encodeState(state);
    },

    async write(encoded, { offset, length, body }) {
      const state = decodeState<S3UploadState>(encoded);
      checkChunk(state, { offset, length });
      // The caller recorded the state it passes, so the pieces of its latest part are no longer needed.
      await deletePieces(state, state.spent);
      const end = offset + length;
      const pending = offset - (state.pieces[0] ?? offset);
      if (pending + length >= state.partBytes || end === state.sizeBytes) {
        const bytes = async function* () {
          yield* pieceBytes(state);
          yield* exactly(body, length);
        };
        const sizes = partSizes(pending + length, Math.max(state.partBytes, SUB_PART_BYTES));
        await sendParts(state, bytes(), sizes);
        return encodeState({
          ...state,
          offset: end,
          parts: state.parts + sizes.length,
          pieces: [],
          spent: state.pieces,
        });
      }
      const piece = await collect(exactly(body, length));
      await client
        .send(new PutObjectCommand({ Bucket, Key: pieceKey(state, offset), Body: piece }))
        .catch(translate);
      return encodeState({ ...state, offset: end, pieces: [...state.pieces, offset], spent: [] });
    },

    async complete(encoded) {
      const state = decodeState<S3UploadState>(encoded);
      if (state.offset !== state.sizeBytes)
        throw new Error(`the upload holds ${state.offset} of its ${state.sizeBytes} bytes`);
      try {
        await publish(state);
      } catch (err) {
        const done = isNoSuchUpload(err) ? await context.stat(state.key) : undefined;
        // Completed before: the object stands at its key already.
        if (done?.sizeBytes !== state.sizeBytes) throw err;
      }
      await sweep(state);
      const info = await context.stat(state.key);
      if (!info) throw new Error(`object ${state.key} is missing right after its upload completed`);
      return info;
    },

    async abort(encoded) {
      const state = decodeState<S3UploadState>(encoded);
      if (state.uploadId !== null) {
        await client
          .send(
            new AbortMultipartUploadCommand({
              Bucket,
              Key: context.objectKey(state.key),
              UploadId: state.uploadId,
            }),
          )
          .catch((err: unknown) => (isNoSuchUpload(err) ? undefined : translate(err)));
      }
      await sweep(state);
    },
  };
}

/**
 * A part as CompleteMultipartUpload wants it: completing must repeat any checksum the SDK
 * attached to the part when it was sent.
 */
export function completedPart(PartNumber: number, part: Omit<CompletedPart, 'PartNumber'>): CompletedPart {
  const { ETag, ChecksumCRC32, ChecksumCRC32C, ChecksumCRC64NVME, ChecksumSHA1, ChecksumSHA256 } = part;
  return { PartNumber, ETag, ChecksumCRC32, ChecksumCRC32C, ChecksumCRC64NVME, ChecksumSHA1, ChecksumSHA256 };
}
