import { randomUUID } from 'node:crypto';
import { copyFile, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import postgres from 'postgres';
import type { Sql } from '../../db';
import { createSql } from '../../db';
import { grantCredits } from '../../db/credits';
import { SegmentationState } from '../../schemas/segmentation';
import { workflowIds } from '../../schemas/temporal';
import { createTestDatabase, type TestDatabase } from './database';
import { TEMPLATE_DATABASE, testEnv } from './env';
import { apiClient } from './http';
import { SHARED_WSI, uploadFile } from './uploads';

/**
 * Work that many test files need done before they start, done once per run on the real API and
 * worker and kept as templates (a database and an objects folder); every file gets a clone of
 * one, in which every id the build made is renamed (fresh organization, user, sample, job and
 * layer ids), so that workflow ids and search attributes stay its own. Two templates:
 *   'ready':     every slide of SHARED_SLIDES ingested to `ready`;
 *   'processed': the ready template, and then its PROCESSED_SLIDE segmented, predicted with
 *                PROCESSED_MARKERS and the layer's marker tables made for that job.
 * A clone has the rows and objects, not the Temporal histories: a test that asserts on the
 * workflows of ingest, segmentation or prediction runs them itself.
 */
export const SHARED_SLIDES = ['CMU-1-Small-Region.svs'] as const;
export type SharedSlideName = (typeof SHARED_SLIDES)[number];
export const PROCESSED_SLIDE: SharedSlideName = 'CMU-1-Small-Region.svs';
export const PROCESSED_MARKERS = ['DAPI', 'CD3'] as const;
export type SharedSlidesKind = 'ready' | 'processed';

export interface SharedTenant {
  organizationId: string;
  userId: string;
  apiKey: string;
  keyId: string;
}

/** The processed template's sample: segmented (one layer) and predicted (one completed job). */
export interface ProcessedSample {
  sampleId: string;
  jobId: string;
  layerId: string;
  markers: readonly string[];
}

/**
 * What a build needs running: the API and a worker on `db` and `root`, with `tenant` (or a
 * tenant of its own).
 */
export type StartBuildStack = (
  db: TestDatabase,
  root: string,
  tenant?: SharedTenant,
) => Promise<{ api: string; tenant: SharedTenant; client: Client; close(): Promise<void> }>;

interface Manifest {
  tenant: SharedTenant;
  samples: Record<SharedSlideName, string>;
  processed?: Omit<ProcessedSample, 'markers'>;
  /** Every id the build made (uuid columns), each renamed in a clone. */
  ids: string[];
}

export interface SharedSlidesClone {
  db: TestDatabase;
  tenant: SharedTenant;
  samples: Record<SharedSlideName, string>;
  processed?: ProcessedSample;
}

const templates = {
  ready: { database: 'sps_shared_slides', folder: 'shared-slides' },
  processed: { database: 'sps_shared_processed', folder: 'shared-processed' },
} as const;
const buildDatabase = (kind: SharedSlidesKind) => `${templates[kind].database}_build`;
/** pg_advisory_lock key: one build at a time across parallel test files. */
const BUILD_LOCK = 0x5350_5331;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const UUID_IN_TEXT = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

const folder = (kind: SharedSlidesKind) => path.join(testEnv().scratch, templates[kind].folder);
const manifestFile = (kind: SharedSlidesKind) => path.join(folder(kind), 'manifest.json');
const objectsFolder = (kind: SharedSlidesKind) => path.join(folder(kind), 'objects');

/** Forgets a previous run's templates (global setup: the schema may have changed). */
export async function resetSharedSlides(admin: postgres.Sql): Promise<void> {
  for (const kind of ['processed', 'ready'] as const) await resetTemplate(admin, kind);
}

async function resetTemplate(admin: postgres.Sql, kind: SharedSlidesKind): Promise<void> {
  await admin.unsafe(`DROP DATABASE IF EXISTS ${templates[kind].database} WITH (FORCE)`);
  await admin.unsafe(`DROP DATABASE IF EXISTS ${buildDatabase(kind)} WITH (FORCE)`);
  await rm(folder(kind), { recursive: true, force: true });
}

/**
 * A database and an objects folder (`root`) cloned from the `kind` template (built first if no
 * file has built it yet in this run), owned by a fresh tenant.
 */
export async function cloneSharedSlides(
  root: string,
  startBuildStack: StartBuildStack,
  kind: SharedSlidesKind = 'ready',
): Promise<SharedSlidesClone> {
  const manifest = await sharedSlidesTemplate(kind, startBuildStack);
  const renames = new Map<string, string>(manifest.ids.map((id) => [id, randomUUID()]));
  const renamed = (id: string) => renames.get(id) ?? id;
  const db = await createTestDatabase({ template: templates[kind].database });
  await renameIds(db.sql, renames);
  await copyRenamed(objectsFolder(kind), root, renamed);
  const samples = Object.fromEntries(
    Object.entries(manifest.samples).map(([name, id]) => [name, renamed(id)]),
  ) as Record<SharedSlideName, string>;
  const { tenant, processed } = manifest;
  return {
    db,
    tenant: {
      ...tenant,
      organizationId: renamed(tenant.organizationId),
      userId: renamed(tenant.userId),
      keyId: renamed(tenant.keyId),
    },
    samples,
    processed: processed && {
      sampleId: renamed(processed.sampleId),
      jobId: renamed(processed.jobId),
      layerId: renamed(processed.layerId),
      markers: PROCESSED_MARKERS,
    },
  };
}

async function sharedSlidesTemplate(
  kind: SharedSlidesKind,
  startBuildStack: StartBuildStack,
): Promise<Manifest> {
  const admin = postgres(testEnv().databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await admin`SELECT pg_advisory_lock(${BUILD_LOCK})`;
    return await ensureTemplate(admin, kind, startBuildStack);
  } finally {
    await admin`SELECT pg_advisory_unlock(${BUILD_LOCK})`.catch(() => {});
    await admin.end();
  }
}

/** The `kind` template's manifest, built first if missing (the caller holds BUILD_LOCK). */
async function ensureTemplate(
  admin: postgres.Sql,
  kind: SharedSlidesKind,
  startBuildStack: StartBuildStack,
): Promise<Manifest> {
  const built = await readManifest(kind);
  const [present] = await admin`SELECT 1 AS one FROM pg_database WHERE datname = ${templates[kind].database}`;
  if (built && present) return built;
  const base = kind === 'processed' ? await ensureTemplate(admin, 'ready', startBuildStack) : undefined;
  await resetTemplate(admin, kind);
  const from = kind === 'processed' ? templates.ready.database : TEMPLATE_DATABASE;
  await admin.unsafe(`CREATE DATABASE ${buildDatabase(kind)} TEMPLATE ${from}`);
  if (kind === 'processed') await copyRenamed(objectsFolder('ready'), objectsFolder(kind), (name) => name);
  const url = new URL(testEnv().databaseUrl);
  url.pathname = `/${buildDatabase(kind)}`;
  const sql = createSql(url.toString(), { max: 5 });
  // Kept, not dropped: it becomes the template once its connections are closed.
  const db: TestDatabase = { url: url.toString(), sql, drop: () => sql.end({ timeout: 5 }) };
  const stack = await startBuildStack(db, objectsFolder(kind), base?.tenant);
  let manifest: Omit<Manifest, 'ids'>;
  try {
    manifest = base
      ? { ...base, processed: await processSample(stack, sql, base.samples[PROCESSED_SLIDE]) }
      : { tenant: stack.tenant, samples: await ingestSharedSlides(stack) };
  } finally {
    await stack.close();
  }
  const ids = await madeIds(buildDatabase(kind));
  await admin.unsafe(`ALTER DATABASE ${buildDatabase(kind)} RENAME TO ${templates[kind].database}`);
  const complete: Manifest = { ...manifest, ids };
  await writeFile(manifestFile(kind), JSON.stringify(complete));
  return complete;
}

type BuildStack = Awaited<ReturnType<StartBuildStack>>;

async function ingestSharedSlides(stack: BuildStack): Promise<Record<SharedSlideName, string>> {
  const call = apiClient(stack.api, stack.tenant.apiKey);
  const samples: Partial<Record<SharedSlideName, string>> = {};
  for (const name of SHARED_SLIDES) {
    const { id } = await uploadFile(call, path.join(SHARED_WSI, name));
    const result = await stack.client.workflow.getHandle(workflowIds.ingest(id)).result();
    if (result.status !== 'ready') throw new Error(`shared slide ${name} ingested to ${result.status}`);
    samples[name] = id;
  }
  return samples as Record<SharedSlideName, string>;
}

/** Segments `sampleId`, predicts PROCESSED_MARKERS on it and waits for the layer's marker tables. */
async function processSample(
  stack: BuildStack,
  sql: Sql,
  sampleId: string,
): Promise<Omit<ProcessedSample, 'markers'>> {
  const call = apiClient(stack.api, stack.tenant.apiKey);
  const workflow = (id: string) => stack.client.workflow.getHandle(id).result();
  const completed = (what: string, result: { status: string }) => {
    if (result.status !== 'completed') throw new Error(`shared ${what} ended ${result.status}`);
  };
  await grantCredits(sql, { organizationId: stack.tenant.organizationId, amount: 10_000 });
  const segmentation = await call('POST', `/samples/${sampleId}/segmentation`);
  if (segmentation.status !== 202) throw new Error(`segmentation answered ${segmentation.status}`);
  completed('segmentation', await workflow(workflowIds.segmentation(sampleId, 1)));
  const submitted = await call('POST', '/predict', { uploadId: sampleId, markers: PROCESSED_MARKERS });
  if (submitted.status !== 202) throw new Error(`predict answered ${submitted.status}`);
  const jobId = submitted.json.jobId as string;
  completed('prediction', await workflow(workflowIds.prediction(jobId)));
  const state = SegmentationState.parse((await call('GET', `/samples/${sampleId}/segmentation`)).json);
  const layerId = state.layer!.id;
  await workflow(workflowIds.segmentationMarkers(layerId, jobId));
  return { sampleId, jobId, layerId };
}

/** The values of `database`'s uuid columns that the migrated template does not hold. */
async function madeIds(database: string): Promise<string[]> {
  const [made, base] = await Promise.all([uuidValues(database), uuidValues(TEMPLATE_DATABASE)]);
  return [...made].filter((id) => !base.has(id)).sort();
}

async function uuidValues(database: string): Promise<Set<string>> {
  const url = new URL(testEnv().databaseUrl);
  url.pathname = `/${database}`;
  const sql = postgres(url.toString(), { max: 1, onnotice: () => {} });
  try {
    const columns = await sql<{ tbl: string; name: string; array: boolean }[]>`
      SELECT c.oid::regclass::text AS tbl, a.attname AS name, a.atttypid = 'uuid[]'::regtype AS array
      FROM pg_attribute a
      JOIN pg_class c ON c.oid = a.attrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'public' AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
        AND a.atttypid = ANY (ARRAY['uuid', 'uuid[]']::regtype[])`;
    const ids = new Set<string>();
    for (const { tbl, name, array } of columns) {
      const column = `"${name.replaceAll('"', '""')}"`;
      const rows = await sql.unsafe<{ id: string | null }[]>(
        `SELECT DISTINCT (${array ? `unnest(${column})` : column})::text AS id FROM ${tbl}`,
      );
      for (const { id } of rows) if (id) ids.add(id);
    }
    return ids;
  } finally {
    await sql.end();
  }
}

async function readManifest(kind: SharedSlidesKind): Promise<Manifest | undefined> {
  try {
    return JSON.parse(await readFile(manifestFile(kind), 'utf8')) as Manifest;
  } catch {
    return undefined;
  }
}

/**
 * Replaces each id of `renames` wherever it occurs in the database: key and reference columns,
 * object keys in text, JSON documents. Foreign keys and triggers (the ledger is append-only)
 * are off for the one transaction, as every reference moves together. Values without a uuid in
 * their text are skipped.
 */
async function renameIds(sql: Sql, renames: ReadonlyMap<string, string>): Promise<void> {
  if (renames.size === 0) return;
  const pairs = [...renames].map(([from, to]) => {
    if (!UUID.test(from) || !UUID.test(to)) throw new Error(`not a uuid: ${from} -> ${to}`);
    return `ARRAY['${from}', '${to}']`;
  });
  await sql.unsafe(`DO $$
DECLARE
  col record;
  pair text[];
  renamed text;
BEGIN
  PERFORM set_config('session_replication_role', 'replica', true);
  FOR col IN
    SELECT c.oid::regclass AS tbl, a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type
    FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
      AND a.attgenerated = ''
      AND a.atttypid = ANY (ARRAY['uuid', 'text', 'varchar', 'json', 'jsonb', 'uuid[]', 'text[]']::regtype[])
  LOOP
    renamed := format('%I::text', col.name);
    FOREACH pair SLICE 1 IN ARRAY ARRAY[${pairs.join(', ')}] LOOP
      renamed := format('replace(%s, %L, %L)', renamed, pair[1], pair[2]);
    END LOOP;
    EXECUTE format('UPDATE %s SET %I = (%s)::%s WHERE %I::text ~ %L AND %I::text IS DISTINCT FROM %s',
      col.tbl, col.name, renamed, col.type, col.name, '[0-9a-f]{8}-[0-9a-f]{4}-', col.name, renamed);
  END LOOP;
END $$`);
}

/**
 * Copies the folder `from` to `to`, each file or folder name that is an id renamed, and each id
 * in a file's bytes too: the stored manifests and provenance (JSON), the Parquet tables' key-value
 * metadata and the AnnData file's string attributes (an HDF5 global heap) hold the layer's,
 * sample's and job's ids as plain text. An id and its new name are both 36 ASCII bytes, so no
 * length or offset in any file moves, and none of those places is under a checksum.
 */
async function copyRenamed(from: string, to: string, renamed: (name: string) => string): Promise<void> {
  await mkdir(to, { recursive: true });
  for (const entry of await readdir(from, { withFileTypes: true })) {
    const source = path.join(from, entry.name);
    const target = path.join(to, renamed(entry.name));
    if (entry.isDirectory()) {
      await copyRenamed(source, target, renamed);
      continue;
    }
    const text = (await readFile(source)).toString('latin1');
    const renamedText = text.replace(UUID_IN_TEXT, renamed);
    if (renamedText === text) await copyFile(source, target);
    else await writeFile(target, Buffer.from(renamedText, 'latin1'));
  }
}
