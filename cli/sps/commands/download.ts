import { createWriteStream } from 'node:fs';
import { mkdir, rename, stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import type { Command } from 'commander';
import type { ExportSelection } from '../../../schemas/exports';
import { isSpsError, type SpsClient, SpsError } from '../../../sdk';
import { UsageError } from '../config';
import type { Context } from '../context';
import { type DownloadItem, retryingLostConnections } from '../download';
import { exitCodes } from '../exit-codes';
import { writeFileAtomic } from '../files';
import { formatBytes, formatCount } from '../output';
import { extractStoredEntries, readZipDirectory, type ZipEntry } from '../zip';
import { exportFileItems, manifestAgain, readyExport } from './results';

const formats = ['spatialdata'] as const;

/** The SpatialData elements of the zipped export; its native prediction store stays behind. */
const ELEMENT_GROUPS = ['images/', 'labels/', 'tables/'];
/** The zipped store among the export's files (exportFileItems). */
const ZIP_KEY = 'prediction.ome.zarr.zip';

export function registerDownload(program: Command, context: () => Context): void {
  program
    .command('download')
    .description("Download a job's results (or a sample's newest) in a tool's own format")
    .argument('<sample-or-job>')
    .argument('<dir>')
    .requiredOption('--format <format>', `${formats.join(', ')}: a local SpatialData store (read_zarr)`)
    .action(async (id: string, dir: string, flags: { format: string }) => {
      if (!(formats as readonly string[]).includes(flags.format)) {
        throw new UsageError(`--format must be one of ${formats.join(', ')}`);
      }
      const ctx = context();
      const { client } = await ctx.connect();
      const jobId = await jobOf(client, id, ctx.signal);
      const selection: ExportSelection = {
        includeHe: true,
        includeSegmentation: true,
        includeOriginalUpload: false,
      };
      const manifest = await readyExport(ctx, client, jobId, 'ome-zarr-zip', selection);
      const zip = exportFileItems(
        client,
        manifest,
        manifestAgain(client, jobId, manifest, selection, ctx.signal),
      ).find((item) => item.key === ZIP_KEY);
      if (manifest.status !== 'ready' || !zip) {
        process.exitCode = exitCodes.workFailed;
        ctx.print(() => `the export ${manifest.status}: ${manifest.error ?? ''}`, manifest);
        return;
      }
      const written = await writeSpatialData(ctx, zip, dir);
      const skipped = written.skipped > 0 ? `; ${written.skipped} already there` : '';
      ctx.print(
        () =>
          `SpatialData store of job ${jobId} written to ${dir}: ${formatCount(written.files, 'file')} (${formatBytes(written.bytes)})${skipped}; open it with spatialdata.read_zarr("${dir}")`,
        { dir, jobId, format: flags.format, ...written },
      );
    });
}

/** The job itself, or a sample's newest job with results. */
async function jobOf(client: SpsClient, id: string, signal: AbortSignal): Promise<string> {
  try {
    return (await client.jobs.get(id, { signal })).id;
  } catch (err) {
    if (!isSpsError(err, 'not_found')) throw err;
  }
  const sample = await client.samples.get(id, { signal });
  const newest = sample.jobs
    .filter((job) => job.resultsAvailable)
    .sort((a, b) => (b.completedAt ?? '').localeCompare(a.completedAt ?? ''))[0];
  if (!newest) {
    throw new SpsError('results_not_ready', `sample ${id} has no job with results yet`, { status: 409 });
  }
  return newest.id;
}

/**
 * The SpatialData part of the zipped export, unzipped into `dir` as it downloads: its
 * directory read with ranged GETs, then the archive streamed once; `images/`, `labels/` and
 * `tables/` written as they are, the root `zarr.json` with SpatialData's attributes only (its
 * NGFF copy of the prediction names the native `markers/` arrays, which stay behind: the same
 * pixels are the `prediction` image). Each file goes to `FILE.part`, then its name; a file at
 * its name is done, so a connection that breaks off (or a rerun) goes on with a ranged GET
 * from the first entry still missing.
 */
async function writeSpatialData(ctx: Context, zip: DownloadItem, dir: string) {
  const get = (range: string) => zip.fetch(range, ctx.signal);
  const entries = (
    await readZipDirectory(async (range) => new Uint8Array(await (await get(range)).arrayBuffer()))
  ).filter(
    (entry) => entry.name === 'zarr.json' || ELEMENT_GROUPS.some((group) => entry.name.startsWith(group)),
  );
  if (!entries.some((entry) => entry.name === 'zarr.json'))
    throw new SpsError('invalid_response', 'the zip has no root zarr.json');
  const root = path.resolve(dir);
  const targetOf = (entry: ZipEntry) => {
    const target = path.resolve(root, entry.name);
    if (!target.startsWith(root + path.sep)) {
      throw new SpsError('invalid_response', `refusing a key outside the folder: ${entry.name}`);
    }
    return target;
  };
  const progress = ctx.progress();
  const bar = progress.bar(`download ${formatCount(entries.length, 'file')}`, {
    total: entries.length,
    bytes: false,
  });
  const summary = { files: 0, bytes: 0, skipped: 0 };
  const write = async (entry: ZipEntry, data: AsyncIterable<Buffer>) => {
    const target = targetOf(entry);
    await mkdir(path.dirname(target), { recursive: true });
    if (entry.name === 'zarr.json') {
      const pieces: Buffer[] = [];
      for await (const piece of data) pieces.push(piece);
      await writeFileAtomic(target, spatialDataRoot(Buffer.concat(pieces)), 0o644);
    } else {
      await pipeline(Readable.from(data), createWriteStream(`${target}.part`), { signal: ctx.signal });
      await rename(`${target}.part`, target);
    }
    summary.files++;
    summary.bytes += entry.size;
    bar.update(summary.files + summary.skipped, formatBytes(summary.bytes));
  };
  try {
    const missing: ZipEntry[] = [];
    for (const entry of entries) {
      if (await exists(targetOf(entry))) summary.skipped++;
      else missing.push(entry);
    }
    await retryingLostConnections(ctx.signal, async () => {
      const left = [];
      for (const entry of missing) if (!(await exists(targetOf(entry)))) left.push(entry);
      if (left.length === 0) return;
      const start = Math.min(...left.map((entry) => entry.localHeader));
      const response = await get(`bytes=${start}-`);
      await extractStoredEntries(body(response, start), left, write, start);
    });
    bar.done(formatBytes(summary.bytes));
  } finally {
    progress.stop();
  }
  return summary;
}

/** A ranged answer's body, checked to start where it was asked to. */
function body(response: Response, start: number): Readable {
  const range = /^bytes (\d+)-/.exec(response.headers.get('content-range') ?? '');
  if (response.status !== 206 || Number(range?.[1]) !== start || !response.body)
    throw new SpsError('invalid_response', `the export did not answer its bytes from ${start}`);
  return Readable.fromWeb(response.body as WebReadableStream<Uint8Array>);
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}

/** The zip's root group with only SpatialData's container attributes. */
function spatialDataRoot(bytes: Buffer): string {
  const group = JSON.parse(bytes.toString('utf8')) as { attributes?: Record<string, unknown> };
  const spatialdata = group.attributes?.spatialdata_attrs;
  if (spatialdata === undefined) throw new SpsError('invalid_response', 'the zip is not a SpatialData store');
  return `${JSON.stringify({ zarr_format: 3, node_type: 'group', attributes: { spatialdata_attrs: spatialdata } }, null, 2)}\n`;
}
