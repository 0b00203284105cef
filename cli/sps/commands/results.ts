import type { Command } from 'commander';
import {
  type ExportFormat,
  type ExportManifest,
  type ExportSelection,
  exportFormats,
} from '../../../schemas/exports';
import type { SegmentationState } from '../../../schemas/segmentation';
import { isSpsError, renewableStoreRoot, type SpsClient, storeKeys } from '../../../sdk';
import type { Context } from '../context';
import { type DownloadItem, type DownloadSummary, downloadAll } from '../download';
import { exitCodes } from '../exit-codes';
import { wholeNumber } from '../flags';
import { formatBytes, formatCount, formatRecord } from '../output';
import { poll } from '../wait';

const rangeHeader = (range: string | undefined): Record<string, string> => (range ? { range } : {});

/** The keys of a store read through `read(key)`, as download items under `prefix`. */
async function storeItems(
  read: (key: string, range: string | undefined, signal: AbortSignal) => Promise<Response>,
  signal: AbortSignal,
  prefix = '',
): Promise<DownloadItem[]> {
  const keys = await storeKeys(async (key) => (await read(key, undefined, signal)).json());
  return keys.map((key) => ({
    key: `${prefix}${key}`,
    fetch: (range, s) => read(key, range, s),
    optional: key !== 'zarr.json',
  }));
}

/**
 * A file behind a signed link. Refused with 403 (the link's hour is up), it asks `fresh` for
 * the file's link in the export's manifest asked again, and reads on under it.
 */
function signedItem(
  client: SpsClient,
  key: string,
  url: string,
  fresh: () => Promise<string | undefined>,
): DownloadItem {
  let current = url;
  const get = (range: string | undefined, signal: AbortSignal) =>
    client.transport.send({
      method: 'GET',
      url: current,
      headers: rangeHeader(range),
      signal,
      bearer: false,
    });
  return {
    key,
    fetch: async (range, signal) => {
      try {
        return await get(range, signal);
      } catch (err) {
        // The service's own links answer `forbidden`; an object store's presigned one only 403.
        const renewed = isSpsError(err) && err.status === 403 ? await fresh() : undefined;
        if (renewed === undefined) throw err;
        current = renewed;
        return get(range, signal);
      }
    },
  };
}

/** `ask`, run once for all who call while it is under way. */
function shared<T>(ask: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () =>
    (pending ??= ask().finally(() => {
      pending = undefined;
    }));
}

/** Downloads with a bar over files (the byte total of a store is unknown until it is read). */
async function download(
  ctx: Context,
  dir: string,
  items: DownloadItem[],
  parallel: number,
): Promise<DownloadSummary> {
  const progress = ctx.progress();
  const bar = progress.bar(`download ${formatCount(items.length, 'file')}`, {
    total: items.length,
    bytes: false,
  });
  let files = 0;
  let bytes = 0;
  try {
    const summary = await downloadAll(dir, items, {
      parallel,
      signal: ctx.signal,
      onBytes: (n) => {
        bytes += n;
      },
      onFile: () => bar.update(++files, formatBytes(bytes)),
    });
    bar.done(formatBytes(bytes));
    return summary;
  } finally {
    progress.stop();
  }
}

function summaryText(dir: string, summary: DownloadSummary): string {
  const written = `${formatCount(summary.files, 'file')} (${formatBytes(summary.bytes)}) written to ${dir}; ${summary.skipped} already there`;
  // Only a store has chunks that were never written; a file export has none to mention.
  return summary.absent > 0 ? `${written}; ${summary.absent} chunks never written (fill value)` : written;
}

/**
 * Reads the keys of a store through its signed store link: no credential rides along, and a
 * missing chunk answers 404 like any other reader's probe. The link lives 1 h: a read refused
 * after that asks `renew` for a fresh one (once for the reads refused together) and goes on.
 */
const storeLinkReader = (client: SpsClient, link: string, renew: () => Promise<string>) => {
  const root = renewableStoreRoot(link, renew);
  const get = (at: string, key: string, range: string | undefined, signal: AbortSignal) =>
    client.transport.send({
      method: 'GET',
      url: `${at}${key}`,
      headers: rangeHeader(range),
      signal,
      bearer: false,
    });
  return async (key: string, range: string | undefined, signal: AbortSignal) => {
    const used = root.current;
    try {
      return await get(used, key, range, signal);
    } catch (err) {
      const again = isSpsError(err) && err.status === 403 ? await root.renewedAfter(used) : undefined;
      if (again === undefined) throw err;
      return get(again, key, range, signal);
    }
  };
};

/** A job's result link, asked afresh. */
const resultLink = (client: SpsClient, jobId: string, signal: AbortSignal) => async () =>
  (await client.jobs.results(jobId, { signal })).resultUrl;

export function registerResults(program: Command, context: () => Context): void {
  program
    .command('results')
    .description("Download a job's prediction store")
    .command('download')
    .description('Download every file of the OME-Zarr store (parallel, resumable, sizes verified)')
    .argument('<job>')
    .argument('<dir>')
    .option('--parallel <n>', 'files at once', '8')
    .action(async (jobId: string, dir: string, flags: { parallel: string }) => {
      const ctx = context();
      const parallel = wholeNumber('--parallel', flags.parallel);
      const { client } = await ctx.connect();
      const link = resultLink(client, jobId, ctx.signal);
      const items = await storeItems(storeLinkReader(client, await link(), link), ctx.signal);
      const summary = await download(ctx, dir, items, parallel);
      ctx.print(() => summaryText(dir, summary), { dir, ...summary });
    });

  program
    .command('export')
    .description('Export results as OME-Zarr, zipped OME-Zarr or OME-TIFF')
    .argument('<job>')
    .requiredOption('--format <format>', exportFormats.join(', '))
    .option('--he', 'include the processed H&E')
    .option('--segmentation', 'include the segmentation layer')
    .option('--original', 'include a link to the stored source file')
    .option('--wait', 'wait until the export is ready')
    .option('--download <dir>', 'then download its files into this folder (implies --wait)')
    .option('--parallel <n>', 'files at once when downloading', '8')
    .action(
      async (
        jobId: string,
        flags: {
          format: ExportFormat;
          he?: boolean;
          segmentation?: boolean;
          original?: boolean;
          wait?: boolean;
          download?: string;
          parallel: string;
        },
      ) => {
        const ctx = context();
        const parallel = wholeNumber('--parallel', flags.parallel);
        const { client } = await ctx.connect();
        const selection = {
          includeHe: flags.he === true,
          includeSegmentation: flags.segmentation === true,
          includeOriginalUpload: flags.original === true,
        };
        const manifest =
          flags.wait || flags.download
            ? await readyExport(ctx, client, jobId, flags.format, selection)
            : await client.exports.request(
                jobId,
                { format: flags.format, ...selection },
                { signal: ctx.signal },
              );
        if (manifest.status === 'failed') process.exitCode = exitCodes.workFailed;
        if (flags.download && manifest.status === 'ready') {
          const items = await exportItems(client, jobId, manifest, selection, ctx.signal);
          const summary = await download(ctx, flags.download, items, parallel);
          ctx.print(
            () => `${formatRecord(exportRecord(manifest))}\n${summaryText(flags.download!, summary)}`,
            {
              manifest,
              download: { dir: flags.download, ...summary },
            },
          );
          return;
        }
        ctx.print(() => formatRecord(exportRecord(manifest)), manifest);
      },
    );

  program
    .command('segment')
    .description('Start (or reuse) cell segmentation of a sample; credit-free')
    .argument('<sample>')
    .option('--wait', 'wait until it completes')
    .option('--download <dir>', 'then download the mask and tables into this folder (implies --wait)')
    .option('--parallel <n>', 'files at once when downloading', '8')
    .action(async (sampleId: string, flags: { wait?: boolean; download?: string; parallel: string }) => {
      const ctx = context();
      const parallel = wholeNumber('--parallel', flags.parallel);
      const { client } = await ctx.connect();
      let state: SegmentationState = await client.segmentation.start(sampleId, { signal: ctx.signal });
      const ended = (s: SegmentationState) =>
        ['completed', 'failed', 'cancelled', 'not_started'].includes(s.status);
      if ((flags.wait || flags.download) && !ended(state)) {
        const progress = ctx.progress();
        const bar = progress.bar(`segment ${sampleId.slice(0, 8)}`, { total: 1, bytes: false });
        try {
          state = await poll(
            () => client.segmentation.get(sampleId, { signal: ctx.signal }),
            ended,
            ctx.signal,
            (s) => bar.update(s.job?.progress ?? 0, s.status),
          );
          bar.done(state.status);
        } finally {
          progress.stop();
        }
      }
      if (state.status === 'failed' || state.status === 'cancelled') process.exitCode = exitCodes.workFailed;
      const record = () =>
        formatRecord({
          status: state.status,
          layer: state.layer?.id,
          cells: state.layer?.instanceCount,
          job: state.job?.id,
          error: state.job?.errorMessage,
        });
      if (flags.download && state.layer) {
        const layerId = state.layer.id;
        const manifest = await client.segmentation.manifest(sampleId, layerId, { signal: ctx.signal });
        const read = (key: string, range: string | undefined, signal: AbortSignal) =>
          client.segmentation.file(sampleId, layerId, key, { signal, headers: rangeHeader(range) });
        // The manifest's files as keys under the layer's files endpoint (whatever base URL the
        // service states).
        const files = `/segmentation/${layerId}/files/`;
        const { provenance, cells, outlines, anndata } = manifest.artifacts;
        const tables = [
          provenance.url,
          cells.morphologyUrl,
          ...cells.markers.map((m) => `${cells.markerExpressionBaseUrl}${m}.parquet`),
          ...(outlines ? [outlines.geojsonUrl, outlines.geoparquetUrl] : []),
          ...(anndata ? [anndata.url] : []),
        ].map((url) => url.slice(url.indexOf(files) + files.length));
        const items: DownloadItem[] = [
          ...tables.map((key) => ({
            key,
            fetch: (range: string | undefined, signal: AbortSignal) => read(key, range, signal),
          })),
          ...(await storeItems(
            (key, range, signal) => read(`mask/${key}`, range, signal),
            ctx.signal,
            'mask/',
          )),
        ];
        const summary = await download(ctx, flags.download, items, parallel);
        ctx.print(() => `${record()}\n${summaryText(flags.download!, summary)}`, {
          state,
          download: { dir: flags.download, ...summary },
        });
        return;
      }
      ctx.print(record, state);
    });
}

/** The query that reads the manifest of an export of this format and selection. */
function exportQuery(format: ExportFormat, selection: ExportSelection) {
  return {
    format,
    includeHe: String(selection.includeHe) as 'true' | 'false',
    includeSegmentation: String(selection.includeSegmentation) as 'true' | 'false',
    includeOriginalUpload: String(selection.includeOriginalUpload) as 'true' | 'false',
  };
}

/** Requests an export and polls its manifest, with a bar, until it is ready or failed. */
export async function readyExport(
  ctx: Context,
  client: SpsClient,
  jobId: string,
  format: ExportFormat,
  selection: ExportSelection,
): Promise<ExportManifest> {
  const manifest = await client.exports.request(jobId, { format, ...selection }, { signal: ctx.signal });
  if (manifest.status !== 'pending' && manifest.status !== 'running') return manifest;
  const progress = ctx.progress();
  const bar = progress.bar(`export ${format}`, { total: 1, bytes: false });
  try {
    const ready = await poll(
      () => client.exports.get(jobId, exportQuery(format, selection), { signal: ctx.signal }),
      (m) => m.status === 'ready' || m.status === 'failed',
      ctx.signal,
      (m) => bar.update(0, m.status),
    );
    bar.done(ready.status);
    return ready;
  } finally {
    progress.stop();
  }
}

function exportRecord(manifest: ExportManifest) {
  return {
    status: manifest.status,
    format: manifest.format,
    expires: manifest.expiresAt,
    error: manifest.error,
    prediction: manifest.artifacts.prediction?.downloadUrl,
  };
}

/** An export's single files (not its stores) by where they go, from one manifest. */
function exportFiles(manifest: ExportManifest): Map<string, string> {
  const { prediction, originalUpload, segmentation } = manifest.artifacts;
  const files = new Map<string, string>();
  if (prediction && manifest.format !== 'ome-zarr') {
    const name = manifest.format === 'ome-tiff' ? 'prediction.ome.tif' : 'prediction.ome.zarr.zip';
    files.set(name, prediction.downloadUrl);
  }
  if (originalUpload) files.set(`original/${originalUpload.filename}`, originalUpload.downloadUrl);
  if (segmentation) {
    const { downloads } = segmentation;
    const tables: [string, { downloadUrl: string } | undefined][] = [
      ['provenance.json', downloads.provenance],
      ['instances.parquet', downloads.morphology],
      ...downloads.markers.map((m): [string, { downloadUrl: string }] => [`markers/${m.marker}.parquet`, m]),
      ['cells.geojson', downloads.outlines?.geojson],
      ['outlines.parquet', downloads.outlines?.geoparquet],
      ['cells.h5ad', downloads.anndata],
    ];
    for (const [name, file] of tables) if (file) files.set(`segmentation/${name}`, file.downloadUrl);
  }
  return files;
}

/** The files of a ready export: the converted file (or the native store), the source, the tables. */
async function exportItems(
  client: SpsClient,
  jobId: string,
  manifest: ExportManifest,
  selection: ExportSelection,
  signal: AbortSignal,
) {
  const { prediction, he } = manifest.artifacts;
  const items: DownloadItem[] = [];
  const again = manifestAgain(client, jobId, manifest, selection, signal);
  if (manifest.format === 'ome-zarr') {
    // A segmentation job's export has no prediction artifact: its store is the job's result (the mask).
    const rootUrl = prediction?.rootUrl;
    const renew = rootUrl
      ? async () => (await again()).artifacts.prediction?.rootUrl ?? rootUrl
      : resultLink(client, jobId, signal);
    const reader = storeLinkReader(client, rootUrl ?? (await renew()), renew);
    items.push(...(await storeItems(reader, signal, 'prediction.ome.zarr/')));
  }
  // The H&E is a store of its own unless the prediction file holds it (OME-TIFF, the zip).
  if (he && !prediction?.includesHe) {
    const renew = async () => (await again()).artifacts.he?.rootUrl ?? he.rootUrl;
    items.push(...(await storeItems(storeLinkReader(client, he.rootUrl, renew), signal, 'he.ome.zarr/')));
  }
  items.push(...exportFileItems(client, manifest, again));
  return items;
}

/**
 * An export's single files as download items by where they go; a link refused after its hour
 * renews from `again`, the manifest asked again (once for the reads refused together).
 */
export function exportFileItems(
  client: SpsClient,
  manifest: ExportManifest,
  again: () => Promise<ExportManifest>,
): DownloadItem[] {
  return [...exportFiles(manifest)].map(([key, url]) =>
    signedItem(client, key, url, async () => exportFiles(await again()).get(key)),
  );
}

/** The export's manifest asked again (every link signed afresh), once for all who ask together. */
export const manifestAgain = (
  client: SpsClient,
  jobId: string,
  manifest: ExportManifest,
  selection: ExportSelection,
  signal: AbortSignal,
) => shared(() => client.exports.get(jobId, exportQuery(manifest.format, selection), { signal }));
