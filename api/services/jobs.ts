import type { Logger } from 'pino';
import type { Sql } from '../../db';
import { cancelJobWithoutWorkflow, findJob, type JobRow, requestJobCancel } from '../../db/jobs';
import { findSegmentationRun, type SegmentationRunRow } from '../../db/segmentation-runs';
import {
  type CancelResult,
  isTerminalJobStatus,
  type JobStatusBody,
  type ResultLocation,
} from '../../schemas/jobs';
import { isActiveSegmentationStatus } from '../../schemas/segmentation';
import { isStorageError, type ObjectStore, resolveKey } from '../../storage';
import { segmentationLayerFiles } from '../../storage/locator';
import type { Principal } from '../auth';
import { AppError, notFound } from '../errors';
import type { WorkflowEngine } from '../workflow-engine';
import { openStoredFile, type RangeOf, type StoredFile } from './store-files';
import type { StoreLinks } from './store-links';

/** DECISIONS.md: signed result URLs live 1 h. */
export const RESULT_URL_TTL_SECONDS = 3600;

export interface JobServiceDeps {
  sql: Sql;
  store: ObjectStore;
  workflows: WorkflowEngine;
  logger: Logger;
  storeLinks: StoreLinks;
}

const iso = (date: Date | null) => (date ? date.toISOString() : null);

export function toJobStatusBody(job: JobRow): JobStatusBody {
  return {
    id: job.id,
    status: job.status,
    progress: job.progress,
    reservedCredits: job.reservedCredits,
    markers: job.markers,
    createdAt: iso(job.createdAt),
    startedAt: iso(job.startedAt),
    completedAt: iso(job.completedAt),
    errorMessage: job.errorMessage,
    resultsAvailable: job.resultsAvailable,
  };
}

/**
 * The path of a file inside a result store, as a key relative to the store root, or undefined
 * when it names nothing inside the store. Normalised: empty and `.` segments are dropped
 * (`a//./b` is `a/b`). Nothing: an absolute path, any `..` segment (also percent-encoded,
 * slashes included), a backslash or a control character. Undefined is answered 404, like a
 * missing file.
 */
export function normaliseStorePath(segments: readonly string[]): string | undefined {
  const joined = segments.join('/');
  if (joined === '' || joined.startsWith('/')) return undefined;
  const parts = joined.split('/').filter((part) => part !== '' && part !== '.');
  if (parts.length === 0 || parts.includes('..')) return undefined;
  const relative = parts.join('/');
  try {
    resolveKey(relative);
  } catch (err) {
    if (isStorageError(err, 'InvalidKey')) return undefined;
    throw err;
  }
  return relative;
}

/**
 * What `/jobs/{id}` may name: a prediction job, or a segmentation run (same id space). A
 * segmentation run reads like a credit-free job whose result store is its label mask; it is
 * cancelled only through its own lifecycle, so cancel answers 409 while it is active.
 */
type JobTarget = { kind: 'inference'; job: JobRow } | { kind: 'segmentation'; run: SegmentationRunRow };

function segmentationJobBody(run: SegmentationRunRow): JobStatusBody {
  return {
    id: run.id,
    status: run.status,
    progress: run.progress,
    reservedCredits: 0,
    markers: run.markers,
    createdAt: iso(run.createdAt),
    startedAt: iso(run.startedAt),
    completedAt: iso(run.completedAt),
    errorMessage: run.errorMessage,
    resultsAvailable: run.status === 'completed',
  };
}

export function createJobService(deps: JobServiceDeps) {
  const { sql, store, storeLinks, workflows, logger } = deps;

  async function findTarget(principal: Principal, id: string): Promise<JobTarget> {
    const job = await findJob(sql, principal.organizationId, id);
    if (job) return { kind: 'inference', job };
    const run = await findSegmentationRun(sql, principal.organizationId, id);
    if (run) return { kind: 'segmentation', run };
    throw notFound('job');
  }

  async function get(principal: Principal, id: string): Promise<JobStatusBody> {
    const target = await findTarget(principal, id);
    return target.kind === 'inference' ? toJobStatusBody(target.job) : segmentationJobBody(target.run);
  }

  /**
   * Records the cancel request and asks the engine to cancel `prediction-{id}`; the workflow
   * then moves the job to `cancelled` and releases the reservation in its non-cancellable
   * scope, so the answer may come a moment before GET shows `cancelled`. A job with no workflow
   * (its start failed and the reconciler has not run, or the workflow is gone) is cancelled and
   * refunded here. Repeating the request while the job winds down answers the same.
   */
  async function cancel(principal: Principal, id: string): Promise<CancelResult> {
    const target = await findTarget(principal, id);
    if (target.kind === 'segmentation') {
      const { status } = target.run;
      if (isActiveSegmentationStatus(status)) {
        throw new AppError(
          'segmentation_active',
          'a segmentation run is owned by its own lifecycle and cannot be cancelled here',
        );
      }
      throw alreadyTerminal({ status });
    }
    if (isTerminalJobStatus(target.job.status)) throw alreadyTerminal(target.job);
    const job = await requestJobCancel(sql, principal.organizationId, id);
    if (!job) throw notFound('job');
    if (isTerminalJobStatus(job.status)) {
      // It ended between the read and the request; a job that ended cancelled answers as asked.
      if (job.status === 'cancelled') return { id, status: 'cancelled' };
      throw alreadyTerminal(job);
    }
    if ((await workflows.cancelPrediction(id)) === 'not_found') {
      const cancelled = await cancelJobWithoutWorkflow(sql, id);
      logger.info({ jobId: id, cancelled }, 'cancelled a prediction job that had no workflow');
      if (!cancelled) {
        const ended = await findJob(sql, principal.organizationId, id);
        if (ended && ended.status !== 'cancelled') throw alreadyTerminal(ended);
      }
    }
    return { id, status: 'cancelled' };
  }

  function alreadyTerminal(job: { status: string }): AppError {
    return new AppError('job_already_terminal', `the job is already ${job.status}`, {
      details: { status: job.status },
    });
  }

  async function resultStore(principal: Principal, id: string): Promise<{ prefix: string }> {
    const target = await findTarget(principal, id);
    const { status } = target.kind === 'inference' ? target.job : target.run;
    const prefix =
      target.kind === 'inference'
        ? target.job.resultsAvailable
          ? target.job.resultPrefix
          : null
        : target.run.status === 'completed' && target.run.layerPrefix
          ? `${target.run.layerPrefix}${segmentationLayerFiles.mask}`
          : null;
    if (prefix === null) {
      const ended = isTerminalJobStatus(status);
      const why = ended
        ? `the job ended ${status} without results`
        : `the job is ${status}; results exist once it completes`;
      throw new AppError('results_not_ready', why);
    }
    return { prefix };
  }

  async function resultLocation(principal: Principal, id: string): Promise<ResultLocation> {
    const { prefix } = await resultStore(principal, id);
    const link = storeLinks.link(prefix, RESULT_URL_TTL_SECONDS);
    return {
      resultUrl: link.url,
      expiresAt: link.expiresAt.toISOString(),
      resultBasePath: prefix.slice(0, -1),
    };
  }

  /** Opens one file of the job's store (whole, or the given range) for streaming. */
  async function openResultFile(
    principal: Principal,
    id: string,
    path: readonly string[],
    rangeOf: RangeOf,
  ): Promise<StoredFile> {
    const { prefix } = await resultStore(principal, id);
    const relative = normaliseStorePath(path);
    if (relative === undefined) throw notFound('file');
    return openStoredFile(store, `${prefix}${relative}`, rangeOf);
  }

  return { get, cancel, resultLocation, openResultFile };
}

export type JobService = ReturnType<typeof createJobService>;
