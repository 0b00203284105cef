import { createHash } from 'node:crypto';
import { ApplicationFailure, heartbeat } from '@temporalio/activity';
import type { Sql } from '../db';
import {
  clearUploadState,
  failAbandonedUploads,
  failedUploadsHoldingBytes,
  failUpload,
  findUploadForSession,
  recordContentSha256,
} from '../db/samples';
import type { ObjectStore } from '../storage';

export interface AssembleUploadInput {
  sampleId: string;
}

export type AssembleUploadResult =
  | { status: 'assembled'; storageKey: string; sizeBytes: number; contentSha256: string }
  /** The bytes do not match the declared `contentSha256`; the sample is `upload_failed`. */
  | { status: 'upload_failed'; reason: string };

/** Failed uploads whose bytes one query of the sweep reads. */
const RELEASE_BATCH = 100;

/** Heartbeats while hashing, every this many bytes. */
const HEARTBEAT_BYTES = 256 * 1024 * 1024;

/** Reads the object once, streaming (flat memory whatever the size), for its SHA-256. */
async function sha256Of(store: ObjectStore, key: string): Promise<string> {
  const body = await store.read(key);
  if (!body) throw new Error(`object ${key} vanished while it was hashed`);
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    hash.update(chunk);
    bytes += chunk.length;
    if (bytes % HEARTBEAT_BYTES < chunk.length) heartbeat({ hashedTo: bytes });
  }
  return hash.digest('hex');
}

export function createUploadActivities(deps: { sql: Sql; store: ObjectStore }) {
  const { sql, store } = deps;

  /**
   * Makes sure the upload stands whole at its key, as ingest's first step. The chunks were
   * stored in place as they arrived and the API published the object with the last one, so
   * this is a check, and the same publish when that one failed. The bytes are read only when
   * their SHA-256 is not known yet (the chunks went through more than one API process); a hash
   * other than the declared `contentSha256` fails the upload. Idempotent.
   */
  async function assembleUpload(input: AssembleUploadInput): Promise<AssembleUploadResult> {
    const upload = await findUploadForSession(sql, input.sampleId);
    if (!upload) throw ApplicationFailure.nonRetryable(`sample ${input.sampleId} not found`, 'not_found');
    if (upload.uploadState !== null) {
      await store.uploads.complete(upload.uploadState);
      await clearUploadState(sql, upload.id, upload.uploadState);
    }
    // An empty file has no chunk (`bytes */0` completes it).
    if (upload.fileSize === '0' && !(await store.stat(upload.storageKey))) {
      await store.put(upload.storageKey, new Uint8Array(), { contentType: upload.contentType });
    }
    const info = await store.stat(upload.storageKey);
    if (!info) {
      throw ApplicationFailure.nonRetryable(`the bytes of sample ${upload.id} are not stored`, 'not_found');
    }
    if (String(info.sizeBytes) !== upload.fileSize) {
      throw new Error(`the stored upload has ${info.sizeBytes} bytes, expected ${upload.fileSize}`);
    }
    const assembled = (contentSha256: string) =>
      ({
        status: 'assembled',
        storageKey: upload.storageKey,
        sizeBytes: info.sizeBytes,
        contentSha256,
      }) as const;
    if (upload.contentSha256Checked && upload.contentSha256) return assembled(upload.contentSha256);
    const sha256 = await sha256Of(store, upload.storageKey);
    if (upload.contentSha256 && upload.contentSha256 !== sha256) {
      const reason = `the uploaded bytes have SHA-256 ${sha256}, not the declared contentSha256`;
      await store.delete(upload.storageKey);
      await failUpload(sql, upload.id, reason);
      return { status: 'upload_failed', reason };
    }
    await recordContentSha256(sql, upload.id, sha256);
    return assembled(sha256);
  }

  /**
   * The sweep of abandoned uploads (the `maintenance` Schedule): every upload whose session
   * URL expired before its last byte becomes `upload_failed`, then every failed upload that
   * still holds partial bytes (a staging file, a multipart upload) drops them. Idempotent: a
   * run stopped between the two steps leaves failed uploads that the next run releases.
   */
  async function sweepAbandonedUploads(_input: Record<string, never> = {}): Promise<{
    failed: number;
    released: number;
  }> {
    const failed = await failAbandonedUploads(sql);
    let released = 0;
    for (let after: string | undefined; ; ) {
      const batch = await failedUploadsHoldingBytes(sql, { limit: RELEASE_BATCH, after });
      for (const upload of batch) {
        await store.uploads.abort(upload.uploadState);
        await clearUploadState(sql, upload.id, upload.uploadState);
        released++;
      }
      if (batch.length < RELEASE_BATCH) return { failed, released };
      after = batch.at(-1)!.id;
    }
  }

  return { assembleUpload, sweepAbandonedUploads };
}
