import { ApplicationFailure } from '@temporalio/activity';
import type { Sql } from '../db';
import {
  deleteExpiredExport,
  type ExportRow,
  findExportById,
  listExpiredExports,
  listUnstartedExports,
  markExportWorkflowStarted,
  recordExportStatus,
} from '../db/exports';
import type { ExportRef } from '../schemas/temporal';
import type { ObjectStore } from '../storage';
import { objectKeys } from '../storage/locator';

/** An export whose start was not recorded after this long is started by the reconciler. */
const RECONCILE_AFTER_SECONDS = 30;
const SWEEP_BATCH = 100;

export interface ExportActivityDeps {
  sql: Sql;
  store: ObjectStore;
  /** `WorkflowEngine.startExport`. */
  startExport: (exportRow: ExportRef) => Promise<void>;
}

/** The state changes of an export and its upkeep; the conversion itself is `buildExport`. */
export function createExportActivities(deps: ExportActivityDeps) {
  const { sql, store } = deps;

  async function exportOrFail(exportId: string): Promise<ExportRow> {
    const row = await findExportById(sql, exportId);
    if (!row) throw ApplicationFailure.nonRetryable(`export ${exportId} not found`, 'not_found');
    return row;
  }

  /** `running`; false when the row belongs to another attempt or already ended. */
  async function beginExport(input: { exportId: string; attempt: number }): Promise<{ active: boolean }> {
    const row = await exportOrFail(input.exportId);
    if (row.attempt !== input.attempt || (row.status !== 'pending' && row.status !== 'running')) {
      return { active: false };
    }
    return {
      active: await recordExportStatus(sql, { id: row.id, attempt: input.attempt, status: 'running' }),
    };
  }

  async function publishExport(input: {
    exportId: string;
    attempt: number;
    key: string;
    sizeBytes: number;
  }): Promise<void> {
    await recordExportStatus(sql, {
      id: input.exportId,
      attempt: input.attempt,
      status: 'ready',
      artifactKey: input.key,
      artifactSize: input.sizeBytes,
    });
  }

  /** `failed` with the reason; the attempt's partial files go. */
  async function failExport(input: { exportId: string; attempt: number; error: string }): Promise<void> {
    const row = await exportOrFail(input.exportId);
    const ended = await recordExportStatus(sql, {
      id: row.id,
      attempt: input.attempt,
      status: 'failed',
      error: input.error,
    });
    if (!ended) return;
    const attemptPrefix = `${objectKeys.exportPrefix(row.organizationId, row.sampleId, row.id)}${input.attempt}/`;
    for await (const key of store.list(attemptPrefix)) await store.delete(key);
  }

  async function reconcileExports(
    input: { olderThanSeconds?: number } = {},
  ): Promise<{ started: number; failed: number }> {
    const rows = await listUnstartedExports(sql, input.olderThanSeconds ?? RECONCILE_AFTER_SECONDS);
    const result = { started: 0, failed: 0 };
    for (const row of rows) {
      try {
        await deps.startExport(row);
        await markExportWorkflowStarted(sql, row.id);
        result.started += 1;
      } catch {
        result.failed += 1;
      }
    }
    return result;
  }

  /** Expired exports go with every file they made; a later identical request starts afresh. */
  async function sweepExpiredExports(_input: Record<string, never> = {}): Promise<{ removed: number }> {
    let removed = 0;
    for (const row of await listExpiredExports(sql, SWEEP_BATCH)) {
      if (!(await deleteExpiredExport(sql, row.id))) continue;
      const prefix = objectKeys.exportPrefix(row.organizationId, row.sampleId, row.id);
      for await (const key of store.list(prefix)) await store.delete(key);
      removed += 1;
    }
    return { removed };
  }

  return { beginExport, publishExport, failExport, reconcileExports, sweepExpiredExports };
}
