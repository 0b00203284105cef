import { ApplicationFailure, Context, heartbeat } from '@temporalio/activity';
import {
  finishPrediction,
  mergeBandSummaries,
  openModelSession,
  type PredictionProgress,
  predictBand,
  predictionBandCount,
} from '../compute/prediction';
import { openHePyramid } from '../compute/pyramid';
import { prefixedStore } from '../compute/store';
import type { Sql } from '../db';
import { repriceProvisionalJob, settleJobInTransaction } from '../db/credits';
import {
  applyJobProgress,
  findJobById,
  findJobSampleState,
  type JobRow,
  recordJobProgress,
} from '../db/jobs';
import { findSlide } from '../db/sample-slides';
import { modelSpec } from '../models/registry';
import { failedSampleStatuses, type JobStatus } from '../schemas/enums';
import { isTerminalJobStatus, type TerminalJobStatus } from '../schemas/jobs';
import type { ObjectStore } from '../storage';
import { objectKeys } from '../storage/locator';
import { storedPatchGrid } from './patch-grid';
import { tilesReporter } from './tiles-report';

/** Progress events are throttled to one a second (DECISIONS.md, Job lifecycle). */
const PROGRESS_EVENT_INTERVAL_MS = 1000;

/** What a band (or every band, in a re-run) finished: positions, and those that failed. */
export interface PredictionRun {
  tiles: number;
  failedTiles: number;
}

/** Bands of one job inferred at once, unless `PREDICTION_BANDS_PER_JOB` says otherwise. */
export const DEFAULT_PREDICTION_BANDS_IN_FLIGHT = 4;

export function createPredictionActivities(deps: {
  sql: Sql;
  store: ObjectStore;
  /** Bands of one job inferred at once, on whichever compute workers take them. */
  predictionBandsInFlight?: number;
}) {
  const { sql, store } = deps;

  async function jobOrFail(jobId: string): Promise<JobRow> {
    const job = await findJobById(sql, jobId);
    if (!job) throw ApplicationFailure.nonRetryable(`job ${jobId} not found`, 'not_found');
    return job;
  }

  /** Moves the job on; false when it is already terminal (cancelled meanwhile), so the caller stops. */
  async function advance(jobId: string, status: JobStatus, progress?: number): Promise<boolean> {
    return recordJobProgress(sql, { jobId, status, progress });
  }

  /**
   * An operator's re-run (`rerunActivityWorkflow`) redoes a step over a finished job's stored
   * results and leaves its status, events and credits alone; a job without results (never
   * finished, failed, cancelled) has nothing to redo.
   */
  function requireResults(job: JobRow): void {
    if (!job.resultsAvailable) {
      throw ApplicationFailure.nonRetryable(
        `job ${job.id} is ${job.status} and has no results: there is nothing to re-run`,
        'conflict',
      );
    }
  }

  /** `dispatching`: the model is chosen and its file must load on this worker. */
  async function dispatchJob(input: { jobId: string }): Promise<{ active: boolean }> {
    const job = await jobOrFail(input.jobId);
    if (!(await advance(job.id, 'dispatching'))) return { active: false };
    await openModelSession(modelSpec(job.model ?? ''));
    return { active: true };
  }

  /**
   * For a job submitted before its sample was ready (DECISIONS.md): `waiting` while the sample is
   * prepared; once it is ready, the reservation drops to the exact price on the tissue grid at the
   * job's mpp (`priced`, also for a job priced exactly from the start). A sample that failed fails
   * the job with its reason; the settlement then refunds the whole reservation.
   */
  async function priceJobOnReadySample(input: {
    jobId: string;
  }): Promise<{ state: 'waiting' | 'priced' | 'inactive' }> {
    const job = await jobOrFail(input.jobId);
    if (isTerminalJobStatus(job.status)) return { state: 'inactive' };
    if (!job.priceProvisional) return { state: 'priced' };
    const sample = await findJobSampleState(sql, job.sampleId);
    if (!sample) throw ApplicationFailure.nonRetryable(`sample ${job.sampleId} was deleted`, 'not_found');
    if (failedSampleStatuses.has(sample.status)) {
      throw ApplicationFailure.nonRetryable(
        `the sample ended ${sample.status}: ${sample.statusMessage ?? 'no reason recorded'}`,
        'sample_failed',
      );
    }
    if (sample.status !== 'ready') return { state: 'waiting' };
    const { grid } = await patchGridOf(job);
    await repriceProvisionalJob(sql, { jobId: job.id, patchCount: grid.count });
    return { state: 'priced' };
  }

  /** The credit grid the job was priced on, rebuilt from the stored tissue mask at the job's mpp. */
  async function patchGridOf(job: JobRow) {
    const slide = await findSlide(sql, job.sampleId);
    const grid =
      slide?.hePrefix && job.mpp !== null ? await storedPatchGrid(store, slide, job.mpp) : undefined;
    if (!slide?.hePrefix || !grid) {
      throw ApplicationFailure.nonRetryable(
        `sample ${job.sampleId} has no tissue mask or pyramid`,
        'conflict',
      );
    }
    return { grid, hePrefix: slide.hePrefix };
  }

  /**
   * `preprocessing`: the tile plan is the priced grid. A grid that no longer matches the price
   * (the mask was remade) fails the job rather than charging for other work. Answers the plan's
   * bands of shard rows and how many of them may run at once.
   */
  async function planJob(input: {
    jobId: string;
  }): Promise<{ active: boolean; positions: number; bands: number; concurrency: number }> {
    const job = await jobOrFail(input.jobId);
    const concurrency = deps.predictionBandsInFlight ?? DEFAULT_PREDICTION_BANDS_IN_FLIGHT;
    if (!(await advance(job.id, 'preprocessing')))
      return { active: false, positions: 0, bands: 0, concurrency };
    const plan = await planInputs(job);
    if (plan.grid.count !== job.patchCount) {
      throw ApplicationFailure.nonRetryable(
        `the tissue grid has ${plan.grid.count} patches, the job was priced for ${job.patchCount}`,
        'conflict',
      );
    }
    const bands = predictionBandCount({ ...plan, model: { spec: modelSpec(job.model ?? '') } });
    return { active: true, positions: plan.grid.count, bands, concurrency };
  }

  /** What a plan of the job's prediction reads: the H&E, its grid and the markers. */
  async function planInputs(job: JobRow) {
    const { grid, hePrefix } = await patchGridOf(job);
    return {
      he: await openHePyramid(prefixedStore(store, hePrefix)),
      heMpp: job.mpp!,
      grid,
      markers: job.markers,
    };
  }

  function jobStores(job: JobRow) {
    const resultPrefix = objectKeys.predictionStore(job.organizationId, job.sampleId, job.id);
    return {
      resultPrefix,
      sink: prefixedStore(store, resultPrefix),
      summaries: prefixedStore(store, objectKeys.predictionBands(job.organizationId, job.sampleId, job.id)),
    };
  }

  /**
   * `running`: infers the priced positions of one band of shard rows (`band`), or of every band in
   * order (a re-run), into level 0 of the job's store, and keeps each band's summary for
   * postprocessing. Heartbeats the band's resume token after each batch; a retry skips the bands
   * finished and continues the band from its token, with the same bytes. Progress events count
   * `tilesBefore` (the tiles of the bands finished before this one started) and this run's.
   */
  async function predictJob(input: {
    jobId: string;
    band?: number;
    tilesBefore?: number;
    rerun?: boolean;
  }): Promise<PredictionRun | { active: false }> {
    const job = await jobOrFail(input.jobId);
    if (input.rerun) requireResults(job);
    else if (!(await advance(job.id, 'running'))) return { active: false };
    const plan = await planInputs(job);
    const context = Context.current();
    const model = await openModelSession(modelSpec(job.model ?? ''));
    const { resultPrefix, sink, summaries } = jobStores(job);
    // Stops the run when the job turned terminal meanwhile (cancelled) as well as on a cancel.
    const stopped = new AbortController();
    const signal = AbortSignal.any([context.cancellationSignal, stopped.signal]);
    const bands =
      input.band === undefined
        ? Array.from({ length: predictionBandCount({ ...plan, model }) }, (_, b) => b)
        : [input.band];
    const run: PredictionRun = { tiles: 0, failedTiles: 0 };
    const tilesReport = input.rerun ? undefined : tilesReporter();
    let lastEvent = 0;
    try {
      for (const band of bands) {
        const before = (input.tilesBefore ?? 0) + run.tiles;
        const summary = await predictBand({
          ...plan,
          model,
          band,
          sink,
          summaries,
          again: input.rerun,
          signal,
          resume: context.info.heartbeatDetails as PredictionProgress | undefined,
          onProgress: (done, _total, token) => {
            heartbeat(token);
            tilesReport?.report({ tilesDone: before + done, tiles: job.patchCount ?? 0 });
            // A re-run's job is terminal: a progress report would be refused and stop the run.
            if (input.rerun) return;
            const now = Date.now();
            if (now - lastEvent < PROGRESS_EVENT_INTERVAL_MS || !job.patchCount) return;
            lastEvent = now;
            // A lost progress event is harmless: the next one carries the state.
            advance(job.id, 'running', Math.min(1, (before + done) / job.patchCount)).then(
              (active) => active || stopped.abort(),
              () => {},
            );
          },
        });
        run.tiles += summary.tiles;
        run.failedTiles += summary.failedTiles;
      }
    } finally {
      await tilesReport?.settled();
    }
    if (!input.rerun) {
      const done = (input.tilesBefore ?? 0) + run.tiles;
      const progress = job.patchCount ? Math.min(1, done / job.patchCount) : undefined;
      await recordJobProgress(sql, { jobId: job.id, status: 'running', progress, resultPrefix });
    }
    return run;
  }

  /**
   * `postprocessing`: the bands' summaries merged into the statistics, then the pyramid levels
   * the bands left (those spanning several bands), channel windows and the NGFF groups.
   */
  async function postprocessJob(input: { jobId: string; rerun?: boolean }): Promise<{ active: boolean }> {
    const job = await jobOrFail(input.jobId);
    if (input.rerun) requireResults(job);
    else if (!(await advance(job.id, 'postprocessing'))) return { active: false };
    const context = Context.current();
    const { sink, summaries } = jobStores(job);
    const merged = await mergeBandSummaries({
      ...(await planInputs(job)),
      model: { spec: modelSpec(job.model ?? '') },
      summaries,
      signal: context.cancellationSignal,
    });
    if (!merged) {
      throw ApplicationFailure.nonRetryable(
        `job ${job.id} has a band never predicted on its current plan: re-run predict first`,
        'conflict',
      );
    }
    await finishPrediction({
      sink,
      layout: merged.layout,
      model: { spec: modelSpec(job.model ?? '') },
      statistics: merged.statistics,
      // The bands built the lower levels as they went; an operator's re-run rebuilds them all.
      fromLevel: input.rerun ? 1 : merged.pyramidFrom,
      everyShardStored: merged.everyShardStored,
      signal: context.cancellationSignal,
      onProgress: (progress) => heartbeat(progress),
    });
    return { active: true };
  }

  /**
   * The terminal status and the credit settlement, in one transaction, exactly once: a retry, or
   * a second call, finds the job terminal and settled and changes nothing. A job that ends
   * without results loses its partial store.
   */
  async function finishJob(input: {
    jobId: string;
    outcome: TerminalJobStatus;
    succeededFraction?: number;
    errorMessage?: string | null;
  }): Promise<void> {
    const job = await jobOrFail(input.jobId);
    const withResults = input.outcome === 'completed' || input.outcome === 'partial_failed';
    const resultPrefix = objectKeys.predictionStore(job.organizationId, job.sampleId, job.id);
    await sql.begin(async (tx) => {
      await settleJobInTransaction(tx, {
        jobId: job.id,
        outcome: input.outcome,
        succeededFraction: input.succeededFraction,
      });
      await applyJobProgress(tx, {
        jobId: job.id,
        status: input.outcome,
        errorMessage: input.errorMessage ?? null,
        ...(withResults ? { resultPrefix, resultsAvailable: true } : {}),
      });
    });
    if (!withResults) {
      const summaries = objectKeys.predictionBands(job.organizationId, job.sampleId, job.id);
      for (const prefix of [resultPrefix, summaries]) {
        for await (const key of store.list(prefix)) await store.delete(key);
      }
    }
  }

  return { dispatchJob, priceJobOnReadySample, planJob, predictJob, postprocessJob, finishJob };
}
