import { type Hash, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Sql } from '../../db';
import type { PagePosition, UploadRecord } from '../../db/samples';
import * as samples from '../../db/samples';
import {
  type CreatedUpload,
  type CreateUploadRequest,
  UPLOAD_CHUNK_GRANULARITY,
  type Upload,
} from '../../schemas/uploads';
import { isStorageError, type ObjectStore, signToken, verifyToken } from '../../storage';
import { objectKeys } from '../../storage/locator';
import type { Principal } from '../auth';
import { createCursorCodec } from '../cursor';
import { AppError, notFound } from '../errors';
import type { WorkflowEngine } from '../workflow-engine';
import { createUploadHashes } from './upload-hashes';

export interface UploadServiceDeps {
  sql: Sql;
  store: ObjectStore;
  workflows: WorkflowEngine;
  logger: Logger;
  publicBaseUrl: string;
  signingSecret: string;
  limits: { uploadMaxBytes: number; uploadChunkMaxBytes: number; uploadSessionTtlSeconds: number };
  onBytesStored?: (count: number) => void;
  /** How long `complete` waits for the slide header's size (default 30 s). */
  headerWaitMs?: number;
}

/** How long `complete` waits for the header's size; ingest reads it seconds after the last byte. */
const HEADER_WAIT_MS = 30_000;
const HEADER_POLL_MS = 200;
const HEADER_POLL_MAX_MS = 2000;

/** A writer refreshes its chunk claim this often while bytes flow (it lapses after UPLOAD_CLAIM_STALE_SECONDS). */
const CLAIM_REFRESH_MS = 10_000;
/** How often a second request for the same chunk looks whether the first is done. */
const CLAIM_POLL_MS = 100;

/** Every byte is in and the file is being prepared, but its header has not been read yet. */
function awaitingHeader(record: UploadRecord): boolean {
  return record.widthPx === null && (record.status === 'deid_running' || record.status === 'preprocessing');
}

/** What a chunk request answers: 308 with the stored range, or 200 with the finished upload. */
export type ChunkOutcome = { done: false; storedBytes: number } | { done: true; upload: Upload };

type ContentRange =
  | { kind: 'query'; total: number }
  | { kind: 'chunk'; start: number; end: number; total: number };

export function parseContentRange(header: string | undefined): ContentRange {
  const invalid = new AppError(
    'invalid_request',
    'Content-Range must be "bytes START-END/TOTAL" or "bytes */TOTAL"',
  );
  const match = header ? /^bytes (?:(\d{1,16})-(\d{1,16})|\*)\/(\d{1,16})$/.exec(header.trim()) : null;
  if (!match) throw invalid;
  const total = Number(match[3]);
  if (match[1] === undefined) return { kind: 'query', total };
  const start = Number(match[1]);
  const end = Number(match[2]);
  if (end < start || end >= total) throw invalid;
  return { kind: 'chunk', start, end, total };
}

export function toUpload(record: UploadRecord): Upload {
  return {
    id: record.id,
    filename: record.filename,
    fileSize: record.fileSize,
    uploadedBytes: record.uploadedBytes,
    status: record.status,
    statusMessage: record.statusMessage,
    storagePath: record.storageKey,
    createdAt: record.createdAt.toISOString(),
    widthPx: record.widthPx,
    heightPx: record.heightPx,
    autoSegment: record.autoSegment,
  };
}

/**
 * A request body as the store reads it: stopped at `length` (a body longer than its range),
 * counted, hashed, and the writer's claim refreshed while it flows.
 */
async function* receivedBody(
  body: Readable,
  length: number,
  tally: { bytes: number },
  hash: Hash | undefined,
  refreshClaim: () => Promise<void>,
) {
  let refreshedAt = Date.now();
  for await (const chunk of body as AsyncIterable<Buffer>) {
    tally.bytes += chunk.length;
    if (tally.bytes > length)
      throw new AppError('invalid_request', 'the body is longer than its Content-Range');
    hash?.update(chunk);
    if (Date.now() - refreshedAt > CLAIM_REFRESH_MS) {
      await refreshClaim();
      refreshedAt = Date.now();
    }
    yield chunk;
  }
}

export function createUploadService(deps: UploadServiceDeps) {
  const { sql, store, workflows, logger } = deps;
  const cursors = createCursorCodec(deps.signingSecret, 'uploads');
  const hashes = createUploadHashes();

  function sessionUrl(uploadId: string, expiresAt: Date): string {
    const token = signToken(deps.signingSecret, { scope: 'upload', subject: uploadId, expiresAt });
    return `${deps.publicBaseUrl}/api/v1/upload-sessions/${uploadId}?token=${token}`;
  }

  async function create(principal: Principal, request: CreateUploadRequest): Promise<CreatedUpload> {
    if (request.fileSize > deps.limits.uploadMaxBytes) {
      throw new AppError(
        'payload_too_large',
        `fileSize is over the limit of ${deps.limits.uploadMaxBytes} bytes`,
      );
    }
    if (request.contentSha256) {
      const existing = await samples.findUploadBySha256(sql, principal.organizationId, {
        sha256: request.contentSha256,
        fileSize: request.fileSize,
      });
      if (existing) return created(existing, { existing: true });
    }
    const id = randomUUID();
    const uploadExpiresAt = new Date(Date.now() + deps.limits.uploadSessionTtlSeconds * 1000);
    const record = await samples.insertUpload(sql, {
      id,
      organizationId: principal.organizationId,
      createdBy: principal.userId,
      filename: request.filename,
      name: request.name ?? null,
      contentType: request.contentType,
      fileSize: request.fileSize,
      contentSha256: request.contentSha256 ?? null,
      autoSegment: request.autoSegment ?? null,
      mppOverride: request.mpp ?? null,
      storageKey: objectKeys.originalUpload(principal.organizationId, id, request.filename),
      uploadExpiresAt,
    });
    return created(record, { existing: false, uploadUrl: sessionUrl(id, uploadExpiresAt) });
  }

  function created(record: UploadRecord, extra: { existing: boolean; uploadUrl?: string }): CreatedUpload {
    const upload = toUpload(record);
    return { ...upload, uploadId: upload.id, gcsPath: upload.storagePath, ...extra };
  }

  async function get(principal: Principal, id: string): Promise<Upload> {
    const record = await samples.findUpload(sql, principal.organizationId, id);
    if (!record) throw notFound('upload');
    return toUpload(record);
  }

  async function list(principal: Principal, page: { limit: number; cursor?: string }) {
    const after: PagePosition | undefined = page.cursor ? cursors.decode(page.cursor) : undefined;
    const rows = await samples.listUploads(sql, principal.organizationId, { limit: page.limit + 1, after });
    const items = rows.slice(0, page.limit);
    const last = items.at(-1);
    const nextCursor = rows.length > page.limit && last ? cursors.encode(last.position) : null;
    return { uploads: items.map(toUpload), nextCursor };
  }

  /** Starts ingest once the last byte is stored; safe to repeat (the workflow id is fixed). */
  async function ensureIngestStarted(record: UploadRecord): Promise<void> {
    if (record.status !== 'deid_running' || record.ingestStartedAt) return;
    await workflows.startIngest(record.id, { organizationId: record.organizationId });
    await samples.markIngestStarted(sql, record.id);
  }

  /**
   * `POST /uploads/{id}/complete`: returns the upload as it stands, starting ingest if it was
   * missed. Once every byte is in, it waits (up to `headerWaitMs`) for the size read from the
   * slide's header, which older clients read as integers.
   */
  async function complete(principal: Principal, id: string): Promise<Upload> {
    let record = await samples.findUpload(sql, principal.organizationId, id);
    if (!record) throw notFound('upload');
    await ensureIngestStarted(record);
    const deadline = Date.now() + (deps.headerWaitMs ?? HEADER_WAIT_MS);
    // The header is read seconds after the last byte: look often at first, then less.
    for (let pause = HEADER_POLL_MS; awaitingHeader(record) && Date.now() < deadline; pause *= 2) {
      await sleep(Math.min(pause, HEADER_POLL_MAX_MS));
      record = (await samples.findUpload(sql, principal.organizationId, id)) ?? record;
    }
    return toUpload(record);
  }

  async function sessionUpload(id: string, token: string): Promise<UploadRecord> {
    try {
      verifyToken(deps.signingSecret, token, { scope: 'upload', subject: id });
    } catch (err) {
      if (isStorageError(err))
        throw new AppError('unauthorized', 'the upload session URL is invalid or has expired');
      throw err;
    }
    const record = await samples.findUploadForSession(sql, id);
    if (!record) throw notFound('upload');
    return record;
  }

  async function finished(record: UploadRecord): Promise<ChunkOutcome> {
    try {
      await ensureIngestStarted(record);
    } catch (err) {
      // The bytes are safe; `complete` (or a later query) starts ingest when the engine is back.
      logger.error({ err, sampleId: record.id }, 'could not start ingest');
    }
    const fresh = (await samples.findUploadForSession(sql, record.id)) ?? record;
    return { done: true, upload: toUpload(fresh) };
  }

  /** 308 with what is stored now: the chunk was not (another request stored it, or holds it). */
  async function notStored(record: UploadRecord): Promise<ChunkOutcome> {
    const current = (await samples.findUploadForSession(sql, record.id)) ?? record;
    if (current.status !== 'uploading') return finished(current);
    return { done: false, storedBytes: Number(current.uploadedBytes) };
  }

  /**
   * Claims the chunk at `start` for `writer`; a second request for the same chunk waits for the
   * first. Answers the store's state (null before the first chunk), or undefined when the
   * upload moved on meanwhile.
   */
  async function claimChunk(record: UploadRecord, start: number, writer: string) {
    for (;;) {
      const claim = {
        sampleId: record.id,
        startOffset: start,
        writer,
        staleSeconds: samples.UPLOAD_CLAIM_STALE_SECONDS,
      };
      const claimed = await samples.claimUploadChunk(sql, claim);
      if (claimed) return claimed;
      const current = await samples.findUploadForSession(sql, record.id);
      if (current?.status !== 'uploading' || Number(current.uploadedBytes) !== start) return undefined;
      await sleep(CLAIM_POLL_MS);
    }
  }

  /** The store's state for a claimed chunk, beginning the store's upload before the first. */
  async function storeState(record: UploadRecord, writer: string, saved: string | null) {
    if (saved !== null) return saved;
    const begun = await store.uploads.begin(record.storageKey, {
      sizeBytes: Number(record.fileSize),
      contentType: record.contentType,
    });
    if (await samples.saveUploadState(sql, { sampleId: record.id, writer, uploadState: begun })) return begun;
    await store.uploads.abort(begun);
    return undefined;
  }

  /** Drops the bytes of an upload that failed, and its state, so that nothing is left behind. */
  async function dropStored(record: UploadRecord): Promise<void> {
    const current = (await samples.findUploadForSession(sql, record.id)) ?? record;
    hashes.forget(record.id);
    if (current.uploadState === null) return;
    await store.uploads.abort(current.uploadState);
    await samples.clearUploadState(sql, record.id, current.uploadState);
  }

  /**
   * A writer gone silent past its claim may store its chunk after the upload failed and its
   * bytes were dropped (the sweep of abandoned uploads): it drops what it wrote, so that a
   * failed upload holds no bytes. True when the upload has failed.
   */
  async function dropIfFailed(record: UploadRecord, written: string): Promise<boolean> {
    const current = await samples.findUploadForSession(sql, record.id);
    if (current?.status !== 'upload_failed') return false;
    await store.uploads.abort(written);
    await dropStored(current);
    return true;
  }

  /** The last byte is recorded: publish the object now (ingest does it if this fails). */
  async function publish(record: UploadRecord, uploadState: string): Promise<void> {
    try {
      await store.uploads.complete(uploadState);
      await samples.clearUploadState(sql, record.id, uploadState);
    } catch (err) {
      logger.error({ err, sampleId: record.id }, 'could not publish the upload; ingest will');
    }
  }

  /** The chunk's bytes go to the store at their offset; the sample records them after. */
  async function storeChunk(
    record: UploadRecord,
    range: { start: number; end: number },
    body: Readable,
  ): Promise<ChunkOutcome> {
    const length = range.end - range.start + 1;
    const end = range.end + 1;
    const writer = randomUUID();
    const claimed = await claimChunk(record, range.start, writer);
    if (!claimed) return notStored(record);
    const hash = hashes.resume(record.id, range.start);
    const tally = { bytes: 0 };
    let next: string;
    let state: string | undefined;
    try {
      state = await storeState(record, writer, claimed.uploadState);
      if (state === undefined) return notStored(record);
      const refresh = () => samples.touchUploadClaim(sql, record.id, writer);
      const received = Readable.from(receivedBody(body, length, tally, hash, refresh));
      next = await store.uploads.write(state, { offset: range.start, length, body: received });
    } catch (err) {
      await samples.releaseUploadClaim(sql, record.id, writer);
      if (err instanceof AppError) throw err;
      // The bytes were dropped under the chunk (the upload failed meanwhile): not a server fault.
      if (state !== undefined && (await dropIfFailed(record, state))) return notStored(record);
      if (tally.bytes !== length)
        throw new AppError(
          'invalid_request',
          `the body has ${tally.bytes} bytes, its Content-Range says ${length}`,
        );
      throw err;
    }
    const isLast = end === Number(record.fileSize);
    const sha256 = isLast ? hash?.digest('hex') : undefined;
    if (sha256 && record.contentSha256 && sha256 !== record.contentSha256) {
      await samples.failUpload(
        sql,
        record.id,
        `the uploaded bytes have SHA-256 ${sha256}, not the declared contentSha256`,
      );
      await dropStored(record);
      return finished((await samples.findUploadForSession(sql, record.id)) ?? record);
    }
    const chunk = {
      sampleId: record.id,
      writer,
      startOffset: range.start,
      endOffset: end,
      uploadState: next,
      sha256,
    };
    if (!(await samples.recordUploadChunk(sql, chunk))) {
      await dropIfFailed(record, next);
      return notStored(record);
    }
    deps.onBytesStored?.(length);
    if (!isLast) {
      if (hash) hashes.keep(record.id, end, hash);
      return { done: false, storedBytes: end };
    }
    hashes.forget(record.id);
    await publish(record, next);
    return finished((await samples.findUploadForSession(sql, record.id))!);
  }

  /** One request of the resumable protocol (DECISIONS.md, `PUT {uploadUrl}`). */
  async function putChunk(input: {
    id: string;
    token: string;
    contentRange: string | undefined;
    contentLength: number | undefined;
    body: Readable;
  }): Promise<ChunkOutcome> {
    const record = await sessionUpload(input.id, input.token);
    const range = parseContentRange(input.contentRange);
    if (record.status !== 'uploading' && record.status !== 'upload_failed') return finished(record);
    if (range.total !== Number(record.fileSize)) {
      const message = `Content-Range total ${range.total} differs from the declared fileSize ${record.fileSize}`;
      await samples.failUpload(sql, record.id, message);
      await dropStored(record);
      throw new AppError('invalid_request', message);
    }
    if (record.status === 'upload_failed') {
      throw new AppError('invalid_request', `the upload failed: ${record.statusMessage ?? 'unknown reason'}`);
    }
    const storedBytes = Number(record.uploadedBytes);
    // `bytes */0` is the whole of an empty file, as in the cloud-storage protocol.
    if (range.kind === 'query' && range.total === 0) {
      await samples.completeEmptyUpload(sql, record.id);
      return finished((await samples.findUploadForSession(sql, record.id)) ?? record);
    }
    if (range.kind === 'query' || range.start !== storedBytes) return { done: false, storedBytes };
    const length = range.end - range.start + 1;
    const isLast = range.end + 1 === range.total;
    if (!isLast && length % UPLOAD_CHUNK_GRANULARITY !== 0) {
      throw new AppError(
        'invalid_request',
        `a chunk other than the last must be a multiple of ${UPLOAD_CHUNK_GRANULARITY} bytes`,
      );
    }
    if (length > deps.limits.uploadChunkMaxBytes) {
      throw new AppError(
        'payload_too_large',
        `a chunk may hold at most ${deps.limits.uploadChunkMaxBytes} bytes`,
      );
    }
    if (input.contentLength !== undefined && input.contentLength !== length) {
      throw new AppError('invalid_request', 'Content-Length differs from the Content-Range');
    }
    return storeChunk(record, range, input.body);
  }

  return { create, get, list, complete, putChunk };
}

export type UploadService = ReturnType<typeof createUploadService>;
