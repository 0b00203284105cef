import { failedSampleStatuses, type SampleStatus, settledSampleStatuses } from '../schemas/enums';
import { UPLOAD_CHUNK_GRANULARITY, type Upload } from '../schemas/uploads';
import type { SpsClient } from './client';
import { validated } from './endpoint';
import { isSpsError, SpsError } from './errors';
import { sleep } from './transport';

export const UPLOAD_GRANULE = UPLOAD_CHUNK_GRANULARITY;
const DEFAULT_CHUNK_BYTES = 64 * 1024 * 1024;

/** A request body fetch can send: a Blob slice or a stream go out without being held in memory. */
export type UploadBody = Blob | ReadableStream<Uint8Array> | Uint8Array<ArrayBuffer>;

/**
 * The bytes of one upload, handed out a range at a time so that memory stays flat however
 * large the file: `blobSource` for a browser File or Blob; `fileSource` (sdk/node) streams a
 * local file.
 */
export interface ByteSource {
  name: string;
  size: number;
  /** `length` bytes from `offset` as a body; called again for each attempt of a chunk. */
  slice(offset: number, length: number): UploadBody;
}

export function blobSource(blob: Blob, name?: string): ByteSource {
  return {
    name: name ?? (blob as Blob & { name?: string }).name ?? 'upload',
    size: blob.size,
    slice: (offset, length) => blob.slice(offset, offset + length),
  };
}

/** What a later run needs to resume: remember it before the first byte goes out. */
export interface UploadSession {
  uploadId: string;
  uploadUrl: string;
}

export interface UploadProgress {
  /** Bytes the service has stored. */
  sentBytes: number;
  totalBytes: number;
  /** Where this run started: bytes an earlier run had already stored. */
  resumedFrom: number;
}

export interface UploadOptions {
  contentType?: string;
  /** Display name of the sample. */
  name?: string;
  mpp?: number;
  autoSegment?: boolean;
  /** A session of an earlier run: continue from the service's `Range` instead of starting over. */
  resume?: UploadSession;
  /** Called with each new session before any byte is sent. */
  onSession?: (session: UploadSession) => void | Promise<void>;
  onProgress?: (progress: UploadProgress) => void;
  /** Bytes per PUT, a multiple of 256 KiB (default 64 MiB; halved while the service says 413). */
  chunkBytes?: number;
  /** Consecutive failed PUTs (network, 5xx) tolerated before giving up (default 5). */
  maxAttempts?: number;
  signal?: AbortSignal;
}

type Outcome = { done: true; upload: Upload } | { done: false; storedBytes: number };

/** No answer, or the service's own failure: worth asking again after a pause. */
const isTransient = (err: unknown) =>
  isSpsError(err, 'network') || (isSpsError(err) && (err.status ?? 0) >= 500);

/** `Range: bytes=0-LAST` of a 308; none means nothing is stored. */
function storedBytesOf(response: Response): number {
  const match = /^bytes=0-(\d+)$/.exec(response.headers.get('range') ?? '');
  return match ? Number(match[1]) + 1 : 0;
}

async function outcomeOf(response: Response): Promise<Outcome> {
  if (response.status === 308) {
    await response.body?.cancel();
    return { done: false, storedBytes: storedBytesOf(response) };
  }
  return { done: true, upload: (await validated('putUploadChunk', response)) as Upload };
}

/**
 * Uploads a source through the resumable protocol: chunked PUTs, each streamed from the
 * source, and after a dropped connection (or a rerun given `resume`) it
 * asks the service how far it got and continues from there. Answers the upload once its
 * last byte has landed (ingest then starts on its own).
 */
export async function uploadSource(
  client: SpsClient,
  source: ByteSource,
  options: UploadOptions = {},
): Promise<Upload> {
  let chunkBytes = options.chunkBytes ?? DEFAULT_CHUNK_BYTES;
  if (chunkBytes <= 0 || chunkBytes % UPLOAD_GRANULE !== 0) {
    throw new RangeError(`chunkBytes must be a positive multiple of ${UPLOAD_GRANULE}`);
  }
  const total = source.size;
  const { signal } = options;

  const put = async (url: string, contentRange: string, length = 0, body?: () => UploadBody) =>
    outcomeOf(
      await client.transport.send({
        method: 'PUT',
        url,
        headers: { 'content-range': contentRange, 'content-length': String(length) },
        body,
        signal,
        bearer: false,
      }),
    );
  const ask = (url: string) => put(url, `bytes */${total}`);

  async function newSession(): Promise<UploadSession> {
    const created = await client.uploads.create(
      {
        filename: source.name,
        fileSize: total,
        contentType: options.contentType ?? 'application/octet-stream',
        ...(options.name === undefined ? {} : { name: options.name }),
        ...(options.mpp === undefined ? {} : { mpp: options.mpp }),
        ...(options.autoSegment === undefined ? {} : { autoSegment: options.autoSegment }),
      },
      { signal },
    );
    if (!created.uploadUrl) {
      throw new SpsError('invalid_response', 'the new upload came without an uploadUrl');
    }
    const session = { uploadId: created.id, uploadUrl: created.uploadUrl };
    await options.onSession?.(session);
    return session;
  }

  let session: UploadSession;
  let outcome: Outcome;
  if (options.resume) {
    session = options.resume;
    try {
      outcome = await ask(session.uploadUrl);
    } catch (err) {
      // An expired or unknown session (the URL is its own credential: 401 speaks of it, not of
      // the client's), or a failed upload: this run starts over.
      const over = ['unauthorized', 'forbidden', 'not_found', 'invalid_request'];
      if (!isSpsError(err) || !over.includes(err.code)) throw err;
      session = await newSession();
      outcome = await ask(session.uploadUrl);
    }
  } else {
    session = await newSession();
    outcome = total === 0 ? await ask(session.uploadUrl) : { done: false, storedBytes: 0 };
  }
  const resumedFrom = outcome.done ? total : outcome.storedBytes;
  const report = (sentBytes: number) => options.onProgress?.({ sentBytes, totalBytes: total, resumedFrom });
  report(resumedFrom);

  // Failed requests since the last chunk stored: a chunk, or the questions after it.
  let failures = 0;
  let lost = false;
  const maxAttempts = options.maxAttempts ?? 5;
  while (!outcome.done) {
    const offset = outcome.storedBytes;
    const length = Math.min(chunkBytes, total - offset);
    try {
      if (lost) {
        // After a failed chunk, how far the service got: the same failures may hit this too.
        outcome = await ask(session.uploadUrl);
        lost = false;
      } else {
        outcome = await put(
          session.uploadUrl,
          `bytes ${offset}-${offset + length - 1}/${total}`,
          length,
          () => source.slice(offset, length),
        );
        failures = 0;
      }
    } catch (err) {
      if (isSpsError(err, 'payload_too_large') && chunkBytes > UPLOAD_GRANULE) {
        chunkBytes = Math.max(UPLOAD_GRANULE, Math.floor(chunkBytes / 2 / UPLOAD_GRANULE) * UPLOAD_GRANULE);
        continue;
      }
      if (!isTransient(err) || ++failures >= maxAttempts || signal?.aborted) throw err;
      await sleep(500 * 2 ** failures, signal);
      lost = true;
      continue;
    }
    report(outcome.done ? total : outcome.storedBytes);
  }
  return outcome.upload;
}

export interface IngestWaitOptions {
  signal?: AbortSignal;
  /** Between looks at the upload; 2000 by default. */
  intervalMs?: number;
  /** Each answer, as ingest moves (a status line). */
  onUpload?: (upload: Upload) => void;
  /**
   * Consecutive looks that get no answer or a 5xx tolerated, each after twice the pause before
   * (default 5: about two minutes at the default interval, an API restart's worth).
   */
  maxFailures?: number;
}

/**
 * Polls the upload until ingest stops (there is no stream of it): `ready`, or a failure whose
 * `statusMessage` says why, in the service's words. A look that gets no answer is tried again,
 * so an API restart during a long ingest does not end the wait; a refusal does.
 */
export async function waitForIngest(
  client: SpsClient,
  uploadId: string,
  options: IngestWaitOptions = {},
): Promise<Upload> {
  const intervalMs = options.intervalMs ?? 2000;
  let failures = 0;
  for (;;) {
    let upload: Upload;
    try {
      upload = await client.uploads.get(uploadId, { signal: options.signal });
      failures = 0;
    } catch (err) {
      const tolerated = options.maxFailures ?? 5;
      if (!isTransient(err) || ++failures > tolerated || options.signal?.aborted) throw err;
      await sleep(intervalMs * 2 ** failures, options.signal);
      continue;
    }
    options.onUpload?.(upload);
    if (settledSampleStatuses.has(upload.status)) return upload;
    await sleep(intervalMs, options.signal);
  }
}

/**
 * Why the sample's ingest failed, in the service's words; `null` unless it did. The sample is
 * its upload (the same id), and only the upload carries the `statusMessage`.
 */
export async function ingestFailure(
  client: SpsClient,
  sample: { id: string; status: SampleStatus },
  options: { signal?: AbortSignal } = {},
): Promise<string | null> {
  if (!failedSampleStatuses.has(sample.status)) return null;
  return (await client.uploads.get(sample.id, options)).statusMessage;
}
