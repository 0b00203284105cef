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

/** S3's least part but the last, and its most parts in one upload. */
const MIN_PART_BYTES = 5 * 1024 * 1024;
const MAX_PARTS = 10_000;

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
 * A multipart upload: a chunk of at least `partBytes` (or the last) becomes one part as it
 * streams in; smaller chunks wait as piece objects until they and the chunk that fills the
 * group are sent as one part. The server joins the parts when the upload completes.
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

  async function uploadPart(state: S3UploadState, body: AsyncIterable<Buffer>, length: number) {
    // A body that fails (its client went away) aborts the send instead of failing the stream:
    // the SDK re-emits a stream's error on a stream of its own that nothing listens to.
    const abort = new AbortController();
    let failure: unknown;
    const guarded = async function* () {
      try {
        yield* body;
      } catch (err) {
        failure = err;
        abort.abort(err);
      }
    };
    const command = new UploadPartCommand({
      Bucket,
      Key: context.objectKey(state.key),
      UploadId: state.uploadId!,
      PartNumber: state.parts + 1,
      ContentLength: length,
      Body: Readable.from(guarded()),
    });
    try {
      await client.send(command, { abortSignal: abort.signal });
    } catch (err) {
      if (failure !== undefined) throw failure;
      translate(err);
    }
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
        await uploadPart(state, bytes(), pending + length);
        return encodeState({
          ...state,
          offset: end,
          parts: state.parts + 1,
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
