import { heartbeat } from '@temporalio/activity';
import type { Sql } from '../db';
import { deleteExpiredOAuthPayloads } from '../db/oauth';
import { claimSamplesToPurge, deleteSampleRow, trashExpiredSamples } from '../db/sample-details';
import type { ObjectStore } from '../storage';
import { objectKeys } from '../storage/locator';

const PURGE_BATCH = 100;

export function createRetentionActivities(deps: { sql: Sql; store: ObjectStore }) {
  const { sql, store } = deps;

  /** Expired OAuth codes, tokens and sessions: the adapter ignores them already; this keeps the table small. */
  async function dropExpiredOAuthPayloads(_input: Record<string, never> = {}): Promise<{ dropped: number }> {
    return { dropped: await deleteExpiredOAuthPayloads(sql) };
  }

  /** Moves every sample whose expiration has passed at `asOf` into Trash. Idempotent. */
  async function trashExpired(input: { asOf: string }): Promise<{ trashed: number }> {
    return { trashed: await trashExpiredSamples(sql, new Date(input.asOf)) };
  }

  /**
   * Permanently deletes samples whose Trash window ended at `asOf`: first marks them (restore
   * then answers 409), then deletes every stored object under the sample and any unfinished
   * upload's bytes, then the row. A
   * crash part-way leaves marked samples that the next run finishes.
   */
  async function purgeTrashed(input: { asOf: string; trashWindowDays: number }): Promise<{ purged: number }> {
    let purged = 0;
    for (;;) {
      const batch = await claimSamplesToPurge(sql, {
        now: new Date(input.asOf),
        trashWindowDays: input.trashWindowDays,
        limit: PURGE_BATCH,
      });
      if (batch.length === 0) return { purged };
      for (const sample of batch) {
        // An upload never finished holds bytes outside its objects (a multipart upload, a staging file).
        if (sample.uploadState !== null) await store.uploads.abort(sample.uploadState);
        for await (const key of store.list(objectKeys.samplePrefix(sample.organizationId, sample.id))) {
          await store.delete(key);
        }
        await deleteSampleRow(sql, sample.id);
        purged += 1;
        heartbeat({ purged });
      }
    }
  }

  return { trashExpired, purgeTrashed, dropExpiredOAuthPayloads };
}
