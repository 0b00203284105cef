import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { ApplicationFailure, heartbeat } from '@temporalio/activity';
import type { Sql } from '../db';
import {
  deleteUploadParts,
  failUpload,
  findUploadForSession,
  listUploadParts,
  recordContentSha256,
  type UploadPart,
} from '../db/samples';
import type { ObjectStore } from '../storage';

export interface AssembleUploadInput {
  sampleId: string;
}

export type AssembleUploadResult =
  | { status: 'assembled'; storageKey: string; sizeBytes: number; contentSha256: string }
  /** The bytes do not match the declared `contentSha256`; the sample is `upload_failed`. */
  | { status: 'upload_failed'; reason: string };

/** Yields the parts' bytes in order, hashing and counting them on the way. */
async function* concatenateParts(
  store: ObjectStore,
  parts: UploadPart[],
  tally: { sizeBytes: number; hash: ReturnType<typeof createHash> },
) {
  for (const part of parts) {
    const body = await store.read(part.storageKey);
    if (!body) throw new Error(`upload part ${part.storageKey} is missing`);
    for await (const chunk of body as AsyncIterable<Buffer>) {
      tally.hash.update(chunk);
      tally.sizeBytes += chunk.length;
      yield chunk;
    }
    heartbeat({ assembledTo: part.endOffset });
  }
}

export function createUploadActivities(deps: { sql: Sql; store: ObjectStore }) {
  const { sql, store } = deps;

  /**
   * Concatenates the stored chunks of an upload into its one object, streaming (flat memory
   * whatever the size), and checks the size and any declared `contentSha256`. Idempotent: a
   * retry rebuilds the same object from the same parts; once the parts are gone it stands.
   */
  async function assembleUpload(input: AssembleUploadInput): Promise<AssembleUploadResult> {
    const upload = await findUploadForSession(sql, input.sampleId);
    if (!upload) throw ApplicationFailure.nonRetryable(`sample ${input.sampleId} not found`, 'not_found');
    const parts = await listUploadParts(sql, upload.id);
    if (parts.length === 0 && upload.fileSize !== '0') {
      const info = await store.stat(upload.storageKey);
      if (info && upload.contentSha256) {
        return {
          status: 'assembled',
          storageKey: upload.storageKey,
          sizeBytes: info.sizeBytes,
          contentSha256: upload.contentSha256,
        };
      }
      throw ApplicationFailure.nonRetryable(`sample ${upload.id} has no stored upload parts`, 'not_found');
    }
    const tally = { sizeBytes: 0, hash: createHash('sha256') };
    await store.write(upload.storageKey, Readable.from(concatenateParts(store, parts, tally)), {
      contentType: upload.contentType,
    });
    const sha256 = tally.hash.digest('hex');
    if (String(tally.sizeBytes) !== upload.fileSize) {
      throw new Error(`assembled ${tally.sizeBytes} bytes, expected ${upload.fileSize}`);
    }
    if (upload.contentSha256 && upload.contentSha256 !== sha256) {
      const reason = `the uploaded bytes have SHA-256 ${sha256}, not the declared contentSha256`;
      await store.delete(upload.storageKey);
      await failUpload(sql, upload.id, reason);
      return { status: 'upload_failed', reason };
    }
    await recordContentSha256(sql, upload.id, sha256);
    await Promise.all(parts.map((part) => store.delete(part.storageKey)));
    await deleteUploadParts(sql, upload.id);
    return {
      status: 'assembled',
      storageKey: upload.storageKey,
      sizeBytes: tally.sizeBytes,
      contentSha256: sha256,
    };
  }

  return { assembleUpload };
}
