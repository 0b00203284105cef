import type { Logger } from 'pino';
import type { Sql } from '../../db';
import { creditSummary, reserveCredits } from '../../db/credits';
import {
  countActiveJobs,
  findPricingSample,
  insertQueuedJob,
  lockOrganizationForSubmission,
  markWorkflowStarted,
  type PricingSample,
} from '../../db/jobs';
import { findOrganization } from '../../db/organizations';
import { CURRENT_MODEL, creditGridPositions, type MarkerChannel, modelRegistry } from '../../models/registry';
import { failedSampleStatuses, preparingSampleStatuses } from '../../schemas/enums';
import type { PredictionDryRun, PredictionSubmitted, PredictRequest } from '../../schemas/jobs';
import type { Principal } from '../auth';
import { AppError, notFound } from '../errors';
import type { WorkflowEngine } from '../workflow-engine';

/** What a client over the active-job cap is told to wait: jobs take minutes, not seconds. */
export const ACTIVE_CAP_RETRY_AFTER_SECONDS = 30;
/** A recount or a header read takes a moment: the 409 says when to ask again (clients retry). */
export const PREPARING_RETRY_AFTER_SECONDS = 2;

export interface PredictionServiceDeps {
  sql: Sql;
  workflows: WorkflowEngine;
  logger: Logger;
}

/** The model a request names: the default when omitted; sunset and unknown names refused (400). */
export function resolveModel(requested: string | undefined): {
  version: string;
  channels: readonly MarkerChannel[];
} {
  const version = requested ?? CURRENT_MODEL;
  const entry = modelRegistry.find((model) => model.version === version);
  if (!entry) {
    throw new AppError('unknown_model', `unknown model '${version}'; the current model is ${CURRENT_MODEL}`, {
      details: { currentDefault: CURRENT_MODEL },
    });
  }
  if (entry.state !== 'dispatchable') {
    throw new AppError(
      'model_sunset',
      `model ${version} is read-only since 2026-06-23; use ${CURRENT_MODEL} or omit model`,
      { details: { currentDefault: CURRENT_MODEL } },
    );
  }
  return { version: entry.version, channels: entry.channels };
}

/** Names match exactly; a near miss (`cd8`, `PDL1`) is one in case or punctuation only. */
const nearMissKey = (name: string) => name.toLowerCase().replace(/[^a-z0-9]/g, '');

function unknownMarkersMessage(unknownMarkers: string[], channels: readonly MarkerChannel[]): string {
  const meant = unknownMarkers
    .map((marker) => channels.find((channel) => nearMissKey(channel.name) === nearMissKey(marker))?.name)
    .filter((name) => name !== undefined);
  const hint = meant.length > 0 ? ` (names are exact: did you mean ${meant.join(', ')}?)` : '';
  return `not in the marker catalog: ${unknownMarkers.join(', ')}${hint}`;
}

/** Every requested marker is a channel of the model (400) and within the entitlement (403). */
function checkMarkers(markers: string[], channels: readonly MarkerChannel[], entitlement: string[] | null) {
  const catalog = new Set(channels.map((channel) => channel.name));
  const unknownMarkers = markers.filter((marker) => !catalog.has(marker));
  if (unknownMarkers.length > 0) {
    throw new AppError('unknown_markers', unknownMarkersMessage(unknownMarkers, channels), {
      details: { unknownMarkers },
    });
  }
  if (entitlement === null) return;
  const entitled = new Set(entitlement);
  const unavailableMarkers = markers.filter((marker) => !entitled.has(marker));
  if (unavailableMarkers.length > 0) {
    throw new AppError(
      'marker_not_available',
      `not in this organization's entitlement: ${unavailableMarkers.join(', ')}`,
      { details: { unavailableMarkers } },
    );
  }
}

/** What a job on a sample costs per marker, at which mpp, and whether that is an upper bound. */
interface Price {
  patchCount: number;
  mpp: number;
  provisional: boolean;
}

function requireMpp(sample: PricingSample): number {
  if (sample.effectiveMpp === null) {
    throw new AppError(
      'mpp_required',
      'the sample has no usable scale: set its mpp first (PATCH /samples/{id})',
    );
  }
  return sample.effectiveMpp;
}

/**
 * The price of a job on a ready sample: its tissue patch count at its current effective mpp. A
 * count taken at another mpp (a PATCH of mpp whose recount has not finished) is stale, and
 * charging it would break "the dry run equals the reservation", so the answer is 409 until the
 * recount lands.
 */
function exactPrice(sample: PricingSample): Price {
  const mpp = requireMpp(sample);
  if (sample.patchCount === null || sample.patchCountMpp !== mpp) {
    throw new AppError(
      'sample_not_ready',
      'the tissue recount for the sample’s current mpp is still running; retry in a few seconds',
      { retryAfterSeconds: PREPARING_RETRY_AFTER_SECONDS },
    );
  }
  return { patchCount: sample.patchCount, mpp, provisional: false };
}

/**
 * The price a submission reserves (DECISIONS.md, Submitting before the sample is ready): exact on
 * a ready sample; while it is prepared, every position of the credit grid over the whole slide
 * from the header's size and mpp, an upper bound that the job drops to the exact price once the
 * tissue mask exists. A dry run takes only the exact price.
 */
function priceOf(sample: PricingSample | undefined, options: { beforeReady: boolean }): Price {
  if (!sample) throw notFound('sample');
  if (sample.trashed) throw new AppError('sample_not_ready', 'the sample is in Trash: restore it first');
  if (sample.status === 'ready') return exactPrice(sample);
  if (failedSampleStatuses.has(sample.status))
    throw new AppError(
      'sample_not_ready',
      `the sample is ${sample.status}: it could not be prepared, so it cannot be predicted (its detail says why)`,
    );
  if (!options.beforeReady || !preparingSampleStatuses.has(sample.status)) {
    const need = options.beforeReady ? 'every byte of the upload' : 'a ready sample (the exact price)';
    throw new AppError('sample_not_ready', `the sample is ${sample.status}; this needs ${need}`);
  }
  if (sample.widthPx === null || sample.heightPx === null) {
    throw new AppError('sample_not_ready', "the slide's header is still being read; retry in a few seconds", {
      retryAfterSeconds: PREPARING_RETRY_AFTER_SECONDS,
    });
  }
  const mpp = requireMpp(sample);
  return { patchCount: creditGridPositions(sample.widthPx, sample.heightPx, mpp), mpp, provisional: true };
}

export function createPredictionService(deps: PredictionServiceDeps) {
  const { sql, workflows, logger } = deps;

  /** The checks that need no lock: model, markers, entitlement. */
  async function validate(principal: Principal, body: Omit<PredictRequest, 'dryRun'>) {
    const model = resolveModel(body.model);
    const organization = await findOrganization(sql, principal.organizationId);
    checkMarkers(body.markers, model.channels, organization?.markerEntitlement ?? null);
    return model;
  }

  async function dryRun(
    principal: Principal,
    body: Omit<PredictRequest, 'dryRun'>,
  ): Promise<PredictionDryRun> {
    await validate(principal, body);
    const { patchCount } = priceOf(await findPricingSample(sql, principal.organizationId, body.uploadId), {
      beforeReady: false,
    });
    const credits = await creditSummary(sql, principal.organizationId);
    return {
      dryRun: true,
      patchCount,
      markerCount: body.markers.length,
      estimatedCredits: patchCount * body.markers.length,
      orgBalance: credits.balance,
      orgPending: credits.pending,
    };
  }

  /**
   * One transaction: the organization row is locked, so the cap and the balance are read and the
   * reservation written by one submission at a time; concurrent submissions cannot overdraw.
   * The workflow starts after the commit. If that start fails the job is still accepted (202):
   * the reconciler (`startQueuedJobs`) starts it later.
   */
  async function submit(principal: Principal, body: PredictRequest): Promise<PredictionSubmitted> {
    const model = await validate(principal, body);
    const organizationId = principal.organizationId;
    const job = await sql.begin(async (tx) => {
      const { activeJobCap } = await lockOrganizationForSubmission(tx, organizationId);
      const { patchCount, mpp, provisional } = priceOf(
        await findPricingSample(tx, organizationId, body.uploadId, { share: true }),
        { beforeReady: true },
      );
      const estimate = patchCount * body.markers.length;
      if ((await countActiveJobs(tx, organizationId)) >= activeJobCap) {
        throw new AppError(
          'rate_limited',
          `the organization already has ${activeJobCap} active prediction jobs, its cap; retry when one ends`,
          { retryAfterSeconds: ACTIVE_CAP_RETRY_AFTER_SECONDS },
        );
      }
      const credits = await creditSummary(tx, organizationId);
      const available = credits.balance - credits.pending;
      if (estimate > available) {
        throw new AppError(
          'insufficient_credits',
          `the job needs ${estimate} credits; ${available} are available (balance ${credits.balance}, pending ${credits.pending})`,
          { required: estimate },
        );
      }
      const created = await insertQueuedJob(tx, {
        organizationId,
        sampleId: body.uploadId,
        createdBy: principal.userId,
        model: model.version,
        markers: body.markers,
        patchCount,
        mpp,
        reservedCredits: estimate,
        priceProvisional: provisional,
      });
      await reserveCredits(tx, { organizationId, jobId: created.id, amount: estimate });
      return { id: created.id, reservedCredits: estimate };
    });
    try {
      await workflows.startPrediction(job.id, { organizationId, sampleId: body.uploadId });
      await markWorkflowStarted(sql, job.id);
    } catch (err) {
      logger.warn({ err, jobId: job.id }, 'prediction workflow not started; the reconciler will start it');
    }
    return { jobId: job.id, reservedCredits: job.reservedCredits, status: 'queued' };
  }

  async function predict(
    principal: Principal,
    body: PredictRequest,
  ): Promise<{ status: 200; body: PredictionDryRun } | { status: 202; body: PredictionSubmitted }> {
    if (body.dryRun) return { status: 200, body: await dryRun(principal, body) };
    return { status: 202, body: await submit(principal, body) };
  }

  return { predict, estimate: dryRun };
}

export type PredictionService = ReturnType<typeof createPredictionService>;
