import { randomUUID } from 'node:crypto';
import type { Queryable, Sql } from '../../db';
import * as details from '../../db/sample-details';
import { fieldValuesOf, listFieldDefinitions, replaceTags, writeFieldValue } from '../../db/sample-fields';
import { findSlide } from '../../db/sample-slides';
import { effectiveMpp } from '../../db/samples';
import type {
  BulkExpirationChange,
  ExpirationChange,
  PatchSampleRequest,
  SampleDetail,
} from '../../schemas/samples';
import type { SegmentationState } from '../../schemas/segmentation';
import type { ObjectStore } from '../../storage';
import type { Principal } from '../auth';
import { AppError, notFound } from '../errors';
import type { WorkflowEngine } from '../workflow-engine';
import { toStoredValue, toTagSet } from './field-values';
import { normaliseStorePath } from './jobs';
import { openStoredFile, type RangeOf, type StoredFile } from './store-files';

const DAY_MS = 24 * 3600 * 1000;
const NEWEST_JOBS = 50;
export const TRASH_WINDOW_DAYS = 7;

export interface SampleServiceDeps {
  sql: Sql;
  store: ObjectStore;
  workflows: WorkflowEngine;
  appUrl: string;
  /** The segmentation state a sample detail shows (the segmentation service's). */
  segmentationState: (sampleId: string) => Promise<SegmentationState>;
  now?: () => Date;
}

const iso = (date: Date | null) => (date ? date.toISOString() : null);

/** Expiration, restore and delete: the sample's creator, an organization owner or admin, a platform admin. */
export function mayManageRetention(principal: Principal, createdBy: string | null): boolean {
  return (
    principal.platformAdmin ||
    principal.role === 'owner' ||
    principal.role === 'admin' ||
    principal.userId === createdBy
  );
}

function expirationChangeOf(body: ExpirationChange) {
  if (body.expiresAt !== undefined) return { kind: 'date' as const, expiresAt: new Date(body.expiresAt) };
  if (body.neverExpire) return { kind: 'never' as const };
  return { kind: 'org_default' as const };
}

export function createSampleService(deps: SampleServiceDeps) {
  const { sql, workflows } = deps;
  const now = deps.now ?? (() => new Date());

  async function toDetail(record: details.SampleRecord): Promise<SampleDetail> {
    const [jobs, fields, segmentation] = await Promise.all([
      details.listNewestJobs(sql, record.id, NEWEST_JOBS),
      fieldValuesOf(sql, [record.id]),
      deps.segmentationState(record.id),
    ]);
    const sampleFields = fields.get(record.id) ?? { tags: [], public: false };
    const expiresInDays = record.expiresAt
      ? Math.max(0, Math.floor((record.expiresAt.getTime() - now().getTime()) / DAY_MS))
      : null;
    return {
      ownership: 'mine',
      id: record.id,
      appUrl: `${deps.appUrl}/samples/${record.id}`,
      name: record.name,
      filename: record.filename,
      status: record.status,
      fileSize: record.fileSize,
      widthPx: record.widthPx,
      heightPx: record.heightPx,
      mpp: effectiveMpp(record),
      fields: sampleFields,
      tags: sampleFields.tags as string[],
      createdAt: iso(record.createdAt),
      expiresAt: iso(record.expiresAt),
      expiresAtSource: record.expiresAtSource,
      expiresInDays,
      willExpire: record.expiresAt !== null,
      trashedAt: iso(record.trashedAt),
      jobs: jobs.map((job) => ({
        id: job.id,
        status: job.status,
        progress: job.progress,
        reservedCredits: job.reservedCredits === null ? null : Number(job.reservedCredits),
        markers: job.markers,
        createdAt: iso(job.createdAt),
        startedAt: iso(job.startedAt),
        completedAt: iso(job.completedAt),
        errorMessage: job.errorMessage,
        resultsAvailable: job.resultsAvailable,
      })),
      jobCount: record.jobCount,
      segmentation,
    };
  }

  async function owned(principal: Principal, id: string): Promise<details.SampleRecord> {
    const record = await details.findSample(sql, principal.organizationId, id);
    if (!record) throw notFound('sample');
    return record;
  }

  async function get(principal: Principal, id: string): Promise<SampleDetail> {
    return toDetail(await owned(principal, id));
  }

  /** One file of the sample's processed H&E store (exports point viewers here). */
  async function openHeFile(
    principal: Principal,
    id: string,
    path: readonly string[],
    rangeOf: RangeOf,
  ): Promise<StoredFile> {
    await owned(principal, id);
    const slide = await findSlide(sql, id);
    if (!slide?.hePrefix) throw new AppError('results_not_ready', 'the sample has no processed H&E yet');
    const relative = normaliseStorePath(path);
    if (relative === undefined) throw notFound('file');
    return openStoredFile(deps.store, `${slide.hePrefix}${relative}`, rangeOf);
  }

  /** Validates every supplied field against the definitions, then writes them, in `tx`. */
  async function writeFields(
    tx: Queryable,
    principal: Principal,
    sampleId: string,
    fields: Record<string, unknown>,
  ) {
    if ('public' in fields) throw new AppError('read_only_field', 'fields.public is read-only');
    const definitions = new Map(
      (await listFieldDefinitions(tx, principal.organizationId)).map((d) => [d.key, d]),
    );
    const writes = Object.entries(fields).map(([key, value]) => {
      const definition = definitions.get(key);
      // An unknown property, like one at the top level: the request's shape is wrong (400).
      if (!definition)
        throw new AppError('invalid_request', `fields has unknown property '${key}' in this organization`);
      if (!definition.writable) throw new AppError('read_only_field', `fields.${key} is read-only`);
      if (definition.storage === 'tag_table')
        return () => replaceTags(tx, sampleId, value === null ? [] : toTagSet(value));
      const stored = value === null ? null : toStoredValue(definition, value);
      return () => writeFieldValue(tx, { sampleId, definitionId: definition.id, value: stored });
    });
    for (const write of writes) await write();
  }

  /**
   * Applies every supplied property in one transaction. A supplied countable `mpp` enqueues
   * a tissue recount after the commit; if that fails the update stands and the answer is
   * 500 `recount_enqueue_failed`, and repeating the request enqueues it (fixed workflow id).
   */
  async function patch(principal: Principal, id: string, body: PatchSampleRequest): Promise<SampleDetail> {
    const record = await sql.begin(async (tx) => {
      const current = await details.findSample(tx, principal.organizationId, id, { forUpdate: true });
      if (!current) throw notFound('sample');
      if (current.trashedAt)
        throw new AppError('sample_not_ready', 'the sample is in Trash: restore it first');
      if (body.fields) await writeFields(tx, principal, id, body.fields);
      await details.updateSampleCore(tx, { sampleId: id, name: body.name, mppOverride: body.mpp });
      return (await details.findSample(tx, principal.organizationId, id))!;
    });
    if (body.mpp !== undefined && record.status === 'ready') {
      try {
        await workflows.startRecount(id);
      } catch (err) {
        throw new AppError(
          'recount_enqueue_failed',
          'the update is saved, but the tissue recount could not be queued: repeat the request',
          { cause: err },
        );
      }
    }
    return toDetail(record);
  }

  async function gate(principal: Principal, id: string): Promise<details.SampleRecord> {
    const record = await owned(principal, id);
    if (!mayManageRetention(principal, record.createdBy)) {
      throw new AppError(
        'forbidden',
        "only the sample's creator, an organization owner or admin may do this",
      );
    }
    return record;
  }

  async function moveToTrash(principal: Principal, id: string): Promise<SampleDetail> {
    await gate(principal, id);
    await details.trashSample(sql, principal.organizationId, id, now());
    return get(principal, id);
  }

  /**
   * The restore itself is one conditional UPDATE, so a purge claiming the sample at the same
   * moment either wins (409) or finds it restored; a read-then-write could lose it to both.
   */
  async function restore(principal: Principal, id: string) {
    await gate(principal, id);
    const restored = await details.restoreSample(sql, principal.organizationId, id, now());
    if (restored) return { id, trashedAt: null, expiresAt: iso(restored.expiresAt) };
    const current = await owned(principal, id);
    if (current.purgeStartedAt)
      throw new AppError('deletion_in_progress', 'permanent deletion of this sample has started');
    // Not in Trash: restoring is idempotent.
    return { id, trashedAt: null, expiresAt: iso(current.expiresAt) };
  }

  /** All-or-nothing: every sample passes the gate before anything is written. */
  async function changeExpiration(principal: Principal, ids: string[], body: ExpirationChange) {
    const batchId = randomUUID();
    const change = expirationChangeOf(body);
    return sql.begin(async (tx) => {
      const targets = await details.lockExpirationTargets(tx, principal.organizationId, ids);
      const found = new Set(targets.map((target) => target.id));
      const missing = ids.filter((sampleId) => !found.has(sampleId));
      if (missing.length > 0) throw new AppError('not_found', `sample not found: ${missing.join(', ')}`);
      const refused = targets.filter((target) => !mayManageRetention(principal, target.createdBy));
      if (refused.length > 0) {
        throw new AppError(
          'forbidden',
          `not allowed to change the expiration of: ${refused.map((t) => t.id).join(', ')}`,
        );
      }
      const results = [];
      for (const target of targets) {
        const applied = await details.applyExpiration(tx, {
          target,
          change,
          batchId,
          changedBy: principal.userId,
          reason: body.reason ?? null,
        });
        results.push({ id: target.id, ...applied });
      }
      return { batchId, results };
    });
  }

  async function setExpiration(principal: Principal, id: string, body: ExpirationChange) {
    const { batchId, results } = await changeExpiration(principal, [id], body);
    const result = results[0]!;
    return {
      id,
      expiresAt: iso(result.expiresAt),
      expiresAtSource: result.expiresAtSource,
      expirationChangedAt: result.changedAt.toISOString(),
      expirationChangedBy: principal.userId,
      batchId,
    };
  }

  async function setExpirationInBulk(principal: Principal, body: BulkExpirationChange) {
    const { sampleIds, ...change } = body;
    const { batchId, results } = await changeExpiration(principal, [...new Set(sampleIds)], change);
    return { updated: results.length, batchId };
  }

  return { get, openHeFile, patch, moveToTrash, restore, setExpiration, setExpirationInBulk };
}

export type SampleService = ReturnType<typeof createSampleService>;
