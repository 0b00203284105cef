import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ApplicationFailure, Context, heartbeat } from '@temporalio/activity';
import sharp from 'sharp';
import { deidentifyTiff } from '../compute/deid';
import { deidentifyDicom, openDicomSlide } from '../compute/dicom';
import type { SlideImage } from '../compute/image';
import {
  buildHePyramid as buildPyramidOf,
  buildHePyramidRegion as buildRegionOf,
  type PyramidLevel,
  type PyramidRegion,
  type PyramidResume,
  type PyramidStage,
  planHePyramid,
  pyramidLevels,
  readPyramidLevel,
  rescaleHePyramidGroup,
  writeHePyramidArrays,
  writeHePyramidGroup,
} from '../compute/pyramid';
import { openTiffSlide, probeSlide as probeTiffSlide } from '../compute/slide';
import { detectSlideFormat, type SlideFormat } from '../compute/slide/format';
import { normalizeWithVips } from '../compute/slide/normalize';
import { type ByteSource, type FileSource, fileSource, storeSource } from '../compute/source';
import { type KeyValueStore, prefixedStore } from '../compute/store';
import { detectTissue, encodeMaskPng } from '../compute/tissue';
import { writeMaskArray } from '../compute/zarr';
import type { Sql } from '../db';
import {
  clearDerivedObjects,
  findIngestSample,
  findSlide,
  type IngestSample,
  moveSampleStatus,
  recordDeidentifiedCopy,
  recordHePyramid,
  recordPatchCount,
  recordSlideHeader,
  recordSlideProbe,
  recordTissueMask,
  type SlideLevelRow,
  type SlideProbeRow,
} from '../db/sample-slides';
import { effectiveMpp } from '../db/samples';
import type { ObjectStore } from '../storage';
import { objectKeys } from '../storage/locator';
import { storedPatchGrid } from './patch-grid';

/** Tissue is found at about this scale (DESIGN: 8 to 16 µm per pixel). */
const TISSUE_MICRONS_PER_PIXEL = 10;
/** Without a scale, tissue is found on the largest pyramid level no bigger than this a side. */
const TISSUE_MAX_SIDE_PX = 2048;
const THUMBNAIL_MAX_SIDE_PX = 512;
/** The multiscale's name in the group metadata. */
const HE_NAME = 'H&E';
/** A pyramid region of stage 0 reads 2 level-0 shard rows (8192 px) and builds one level above. */
const PYRAMID_BAND_LEVELS = 1;
/** Regions of one slide's pyramid built at once, unless the worker's configuration says. */
const DEFAULT_PYRAMID_REGIONS_IN_FLIGHT = 4;

/** What `planHePyramidRegions` answers: the regions to build, or null to build in one activity. */
export interface PyramidRegionPlan {
  widthPx: number;
  heightPx: number;
  stages: PyramidStage[] | null;
  regionsInFlight: number;
}

export function createIngestActivities(deps: {
  sql: Sql;
  store: ObjectStore;
  pyramidRegionsInFlight?: number;
}) {
  const { sql, store } = deps;

  async function sampleOrFail(sampleId: string): Promise<IngestSample> {
    const sample = await findIngestSample(sql, sampleId);
    if (!sample) throw ApplicationFailure.nonRetryable(`sample ${sampleId} not found`, 'not_found');
    return sample;
  }

  /** The stored object `key` as a slide reader reads it. */
  async function sourceOf(key: string): Promise<ByteSource> {
    const info = await store.stat(key);
    if (!info) throw new Error(`stored object ${key} is missing`);
    return storeSource(store, key, info.sizeBytes);
  }

  /**
   * Writes the de-identified copy (labels, macros, identifying tags and metadata dropped; tiles
   * copied byte for byte), makes it the sample's stored file, moves the sample to
   * `preprocessing` and deletes the raw upload. A retry after the commit only finishes the delete.
   */
  async function deidentifySlide(input: { sampleId: string }): Promise<{ storageKey: string }> {
    const sample = await sampleOrFail(input.sampleId);
    const rawKey = objectKeys.originalUpload(sample.organizationId, sample.id, sample.filename);
    const deidKey = objectKeys.deidentified(sample.organizationId, sample.id, sample.filename);
    if (sample.status === 'deid_running') {
      const source = await sourceOf(sample.storageKey);
      const format = await detectSlideFormat(source, undefined, sample.filename);
      const { sink, stored } = objectWriter(store, deidKey, contentTypeOf(format));
      // New DICOM UIDs are derived from the sample, so a retried de-id writes the same bytes.
      const uidKey = createHash('sha256').update(`dicom-uids/${sample.id}`).digest();
      const writing =
        format === 'tiff' ? deidentifyTiff(source, sink) : deidentifyDicom(source, sink, { uidKey });
      await writing;
      await stored;
      if (!(await recordDeidentifiedCopy(sql, { sampleId: sample.id, storageKey: deidKey }))) {
        throw ApplicationFailure.nonRetryable(`sample ${sample.id} left deid_running meanwhile`, 'conflict');
      }
    }
    await store.delete(rawKey);
    return { storageKey: deidKey };
  }

  /**
   * The level-0 size and calibration from the uploaded file's header, as soon as it is assembled
   * (DECISIONS.md: never null once every byte is in). The full probe of the de-identified copy
   * follows and records the same values with the rest.
   */
  async function readSlideHeader(input: { sampleId: string }): Promise<void> {
    const sample = await sampleOrFail(input.sampleId);
    const { probe } = await headerOf(await sourceOf(sample.storageKey));
    const base = probe.levels[0];
    if (!base) return;
    await recordSlideHeader(sql, {
      sampleId: sample.id,
      widthPx: base.widthPx,
      heightPx: base.heightPx,
      mpp: probe.effectiveMpp,
    });
  }

  /** Level sizes, vendor and calibration of the de-identified copy. */
  async function probeSlide(input: { sampleId: string }): Promise<SlideProbeRow> {
    const sample = await sampleOrFail(input.sampleId);
    const probe = await probeStored(sample.storageKey);
    await recordSlideProbe(sql, { sampleId: sample.id, probe });
    return probe;
  }

  /** The probe of the slide stored at `key`. */
  async function probeStored(key: string): Promise<SlideProbeRow> {
    const source = await sourceOf(key);
    const { format, probe } = await headerOf(source);
    if (format === 'dicom') return probeRow(format, probe);
    // Opening as an image applies the readers' size limits now, not halfway through the
    // pyramid; NDPI is opened after normalisation (see withSlideImage).
    if (probe.vendor !== 'hamamatsu') await openTiffSlide(source);
    return probeRow(format, probe);
  }

  /**
   * The OME-Zarr H&E pyramid and a JPEG thumbnail in one activity (operators' re-runs, and NDPI,
   * whose normalised copy lives on one worker). Heartbeats after every shard with a resume
   * token; a retry (after a crash or a worker restart) continues from the last one and writes
   * the same bytes.
   */
  async function buildHePyramid(input: { sampleId: string }): Promise<{ levels: number }> {
    const { sample, slide } = await probedSample(input.sampleId);
    const hePrefix = objectKeys.hePyramid(sample.organizationId, sample.id);
    const resume = Context.current().info.heartbeatDetails as PyramidResume | undefined;
    const levels = await withSlideImage(sample, slide.vendor, (image) =>
      buildPyramid(image, { sink: prefixedStore(store, hePrefix), mpp: effectiveMpp(sample), resume }),
    );
    return recordPyramid(sample, levels);
  }

  async function probedSample(sampleId: string) {
    const sample = await sampleOrFail(sampleId);
    const slide = await findSlide(sql, sample.id);
    if (!slide) throw ApplicationFailure.nonRetryable(`sample ${sample.id} has not been probed`, 'conflict');
    return { sample, slide };
  }

  /** The thumbnail from the smallest level, and the pyramid on the sample's record. */
  async function recordPyramid(
    sample: IngestSample,
    levels: readonly PyramidLevel[],
  ): Promise<{ levels: number }> {
    const hePrefix = objectKeys.hePyramid(sample.organizationId, sample.id);
    const thumbnailKey = objectKeys.thumbnail(sample.organizationId, sample.id);
    await store.put(thumbnailKey, await thumbnailOf(prefixedStore(store, hePrefix), levels.length - 1), {
      contentType: 'image/jpeg',
    });
    const rows = levels.map(({ widthPx, heightPx, downsample }) => ({ widthPx, heightPx, downsample }));
    await recordHePyramid(sql, { sampleId: sample.id, hePrefix, levels: rows, thumbnailKey });
    return { levels: levels.length };
  }

  /**
   * The pyramid cut into regions that any worker can build (`buildHePyramidRegion`), with each
   * level's array metadata written: the same bytes as `buildHePyramid`. NDPI answers no stages:
   * its pixels come from a copy normalised on one worker, so it is built there in one activity.
   */
  async function planHePyramidRegions(input: { sampleId: string }): Promise<PyramidRegionPlan> {
    const { sample, slide } = await probedSample(input.sampleId);
    const regionsInFlight = deps.pyramidRegionsInFlight ?? DEFAULT_PYRAMID_REGIONS_IN_FLIGHT;
    const base = slide.levels[0];
    if (slide.vendor === 'hamamatsu' || !base)
      return { widthPx: 0, heightPx: 0, stages: null, regionsInFlight };
    const size = { widthPx: base.widthPx, heightPx: base.heightPx };
    const sink = prefixedStore(store, objectKeys.hePyramid(sample.organizationId, sample.id));
    await writeHePyramidArrays({ ...size, sink });
    const stages = planHePyramid(size.widthPx, size.heightPx, {
      bandLevels: PYRAMID_BAND_LEVELS,
      // A stage of fewer rows than run at once is cut into column ranges: none of them idles.
      regionsPerStage: regionsInFlight,
    });
    return { ...size, stages, regionsInFlight };
  }

  /**
   * One region of the planned pyramid. Heartbeats after every shard with the region's resume
   * token; a retry continues from the last one, and rewrites none of the shards before it.
   */
  async function buildHePyramidRegion(input: {
    sampleId: string;
    widthPx: number;
    heightPx: number;
    region: PyramidRegion;
  }): Promise<void> {
    const { sample, slide } = await probedSample(input.sampleId);
    const context = Context.current();
    const options = {
      widthPx: input.widthPx,
      heightPx: input.heightPx,
      region: input.region,
      sink: prefixedStore(store, objectKeys.hePyramid(sample.organizationId, sample.id)),
      resume: context.info.heartbeatDetails as PyramidResume | undefined,
      signal: context.cancellationSignal,
      onProgress: (progress: PyramidResume) => heartbeat(progress),
    };
    if (input.region.leafLevel > 0) await buildRegionOf(options);
    else await withSlideImage(sample, slide.vendor, (image) => buildRegionOf({ ...options, image }));
  }

  /** The group's metadata once every region is stored, then the thumbnail and the record. */
  async function finishHePyramid(input: {
    sampleId: string;
    widthPx: number;
    heightPx: number;
  }): Promise<{ levels: number }> {
    const sample = await sampleOrFail(input.sampleId);
    const levels = pyramidLevels(input.widthPx, input.heightPx);
    const sink = prefixedStore(store, objectKeys.hePyramid(sample.organizationId, sample.id));
    await writeHePyramidGroup({ sink, name: HE_NAME, levels, mpp: effectiveMpp(sample) });
    return recordPyramid(sample, levels);
  }

  async function buildPyramid(
    image: SlideImage,
    options: { sink: KeyValueStore; mpp: number | null; resume: PyramidResume | undefined },
  ) {
    const result = await buildPyramidOf({
      image,
      sink: options.sink,
      mpp: options.mpp,
      name: HE_NAME,
      resume: options.resume,
      signal: Context.current().cancellationSignal,
      onProgress: (progress) => heartbeat(progress),
    });
    return result.levels;
  }

  /**
   * Runs `work` on the sample's pixels. NDPI goes through libvips into a local tiled TIFF
   * first (see compute/slide/normalize.ts); the scratch copy is removed afterwards.
   */
  async function withSlideImage<T>(
    sample: IngestSample,
    vendor: string,
    work: (image: SlideImage) => Promise<T>,
  ): Promise<T> {
    if (vendor !== 'hamamatsu') {
      const source = await sourceOf(sample.storageKey);
      const format = await detectSlideFormat(source);
      return work(format === 'tiff' ? await openTiffSlide(source) : await openDicomSlide(source));
    }
    // The worker's temporary folder (TMPDIR): docs/operations.md sizes it.
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sps-ingest-'));
    let normalized: FileSource | undefined;
    try {
      const original = path.join(dir, 'slide.ndpi');
      const body = await store.read(sample.storageKey);
      if (!body) throw new Error(`stored object ${sample.storageKey} is missing`);
      await pipeline(body, createWriteStream(original));
      const tiled = path.join(dir, 'normalized.tif');
      await normalizeWithVips(original, tiled);
      heartbeat();
      normalized = await fileSource(tiled);
      return await work(await openTiffSlide(normalized));
    } finally {
      await normalized?.close();
      await rm(dir, { recursive: true, force: true });
    }
  }

  /**
   * The tissue mask from the pyramid level nearest 10 µm per pixel (or, with no scale, the
   * largest level at most 2048 px a side), stored as PNG and as a Zarr array, and the patch
   * count on the model grid for the sample's effective mpp.
   */
  async function detectTissueActivity(input: { sampleId: string }): Promise<{ patchCount: number | null }> {
    const sample = await sampleOrFail(input.sampleId);
    const slide = await findSlide(sql, sample.id);
    if (!slide?.hePrefix || !slide.heLevels) {
      throw ApplicationFailure.nonRetryable(`sample ${sample.id} has no H&E pyramid yet`, 'conflict');
    }
    const he = prefixedStore(store, slide.hePrefix);
    const level = tissueLevel(slide.heLevels, effectiveMpp(sample));
    const pixels = await readPyramidLevel(he, level);
    const tissue = detectTissue(pixels);
    const base = slide.heLevels[0]!;
    const tissueKeys = objectKeys.tissue(sample.organizationId, sample.id);
    await store.put(`${tissueKeys}mask.png`, await encodeMaskPng(tissue), { contentType: 'image/png' });
    await writeMaskArray(prefixedStore(store, `${tissueKeys}mask.zarr/`), tissue);
    const mask = {
      pngKey: `${tissueKeys}mask.png`,
      zarrPrefix: `${tissueKeys}mask.zarr/`,
      width: tissue.width,
      height: tissue.height,
      downsampleX: base.widthPx / tissue.width,
      downsampleY: base.heightPx / tissue.height,
      tissueFraction: tissue.tissueFraction,
    };
    await recordTissueMask(sql, { sampleId: sample.id, mask });
    return recount(sample);
  }

  /**
   * Counts patches from the stored mask for the sample's current effective mpp, and gives the
   * H&E store that scale (it was written with the scale known at ingest).
   */
  async function recount(sample: IngestSample): Promise<{ patchCount: number | null }> {
    const slide = await findSlide(sql, sample.id);
    const mpp = effectiveMpp(sample);
    if (slide?.hePrefix && slide.heLevels) {
      const levels = slide.heLevels.map((level, index) => ({ ...level, path: String(index) }));
      await rescaleHePyramidGroup({ sink: prefixedStore(store, slide.hePrefix), name: HE_NAME, levels, mpp });
    }
    const grid = slide && mpp !== null ? await storedPatchGrid(store, slide, mpp) : undefined;
    const patchCount = grid?.count ?? null;
    await recordPatchCount(sql, { sampleId: sample.id, patchCount, mpp });
    return { patchCount };
  }

  /** The tissue patch count for the sample's current effective mpp (`recount-{sampleId}`). */
  async function recountTissuePatches(input: { sampleId: string }): Promise<{ patchCount: number | null }> {
    return recount(await sampleOrFail(input.sampleId));
  }

  async function finishIngest(input: { sampleId: string }): Promise<void> {
    await moveSampleStatus(sql, { sampleId: input.sampleId, from: ['preprocessing'], to: 'ready' });
  }

  /**
   * Ends a sample in `deid_failed` or `preprocess_failed` with its reason, and removes every
   * derived object, so nothing points at a partial store. Idempotent.
   */
  async function failIngest(input: {
    sampleId: string;
    status: 'deid_failed' | 'preprocess_failed';
    message: string;
  }): Promise<void> {
    const sample = await sampleOrFail(input.sampleId);
    await clearDerivedObjects(sql, sample.id);
    for (const prefix of [
      objectKeys.hePyramid(sample.organizationId, sample.id),
      objectKeys.tissue(sample.organizationId, sample.id),
      objectKeys.deidentified(sample.organizationId, sample.id, sample.filename),
    ]) {
      if (input.status === 'preprocess_failed' && prefix.includes('/deidentified/')) continue;
      for await (const key of store.list(prefix)) await store.delete(key);
    }
    await store.delete(objectKeys.thumbnail(sample.organizationId, sample.id));
    await moveSampleStatus(sql, {
      sampleId: sample.id,
      from: ['deid_running', 'preprocessing'],
      to: input.status,
      message: input.message,
    });
  }

  return {
    readSlideHeader,
    deidentifySlide,
    probeSlide,
    buildHePyramid,
    planHePyramidRegions,
    buildHePyramidRegion,
    finishHePyramid,
    detectTissue: detectTissueActivity,
    recountTissuePatches,
    finishIngest,
    failIngest,
  };
}

/**
 * The pyramid level to find tissue on: with a scale, the one nearest 10 µm per pixel (never
 * finer than needed); without, the largest whose longer side is at most 2048 px.
 */
function tissueLevel(levels: readonly SlideLevelRow[], mpp: number | null): number {
  const last = levels.length - 1;
  if (mpp === null) {
    const index = levels.findIndex((level) => Math.max(level.widthPx, level.heightPx) <= TISSUE_MAX_SIDE_PX);
    return index === -1 ? last : index;
  }
  let best = 0;
  for (let k = 1; k <= last; k++) {
    const distance = (level: number) =>
      Math.abs(Math.log2((mpp * levels[level]!.downsample) / TISSUE_MICRONS_PER_PIXEL));
    if (distance(k) < distance(best)) best = k;
  }
  return best;
}

/** A JPEG of the whole slide, at most 512 px a side, from the smallest pyramid level. */
async function thumbnailOf(he: KeyValueStore, level: number): Promise<Uint8Array> {
  const { data, width, height } = await readPyramidLevel(he, level);
  return sharp(data, { raw: { width, height, channels: 3 } })
    .resize(THUMBNAIL_MAX_SIDE_PX, THUMBNAIL_MAX_SIDE_PX, { fit: 'inside', withoutEnlargement: true })
    .jpeg({ quality: 85 })
    .toBuffer();
}

/**
 * A writable that streams into `key`; `stored` settles when the object is whole (or the write
 * failed). Destroying the writable with an error aborts the object.
 */
function objectWriter(
  store: ObjectStore,
  key: string,
  contentType: string,
): { sink: Writable; stored: Promise<unknown> } {
  const sink = new PassThrough({ highWaterMark: 4 << 20 });
  // A writer that fails destroys the sink with its error and reports it itself; unheard, the
  // 'error' event would take the whole worker down.
  sink.on('error', () => {});
  const stored = store.write(key, sink, { contentType });
  stored.catch(() => {});
  return { sink, stored };
}

interface ProbeLike {
  vendor: string;
  levels: readonly { widthPx: number; heightPx: number; downsample: number }[];
  mpp: { x: number; y: number } | null;
  effectiveMpp: number | null;
  metadata: Record<string, string>;
}

/** The format and the probe of a slide's header, as the readers see it. */
async function headerOf(source: ByteSource) {
  const format = await detectSlideFormat(source);
  return format === 'dicom'
    ? { format, probe: (await openDicomSlide(source)).probe }
    : { format, probe: await probeTiffSlide(source) };
}

function probeRow(format: SlideFormat, probe: ProbeLike): SlideProbeRow {
  return {
    format,
    vendor: probe.vendor,
    levels: probe.levels.map(({ widthPx, heightPx, downsample }) => ({ widthPx, heightPx, downsample })),
    mppX: probe.mpp?.x ?? null,
    mppY: probe.mpp?.y ?? null,
    effectiveMpp: probe.effectiveMpp,
    metadata: probe.metadata,
  };
}

function contentTypeOf(format: SlideFormat): string {
  return format === 'tiff' ? 'image/tiff' : 'application/dicom';
}
