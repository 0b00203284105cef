import { createWriteStream } from 'node:fs';
import { mkdir, rename } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import type { Command } from 'commander';
import type { ExportSelection } from '../../../schemas/exports';
import { isSpsError, type SpsClient, SpsError } from '../../../sdk';
import { UsageError } from '../config';
import type { Context } from '../context';
import { exitCodes } from '../exit-codes';
import { writeFileAtomic } from '../files';
import { formatBytes } from '../output';
import { extractStoredEntries, readZipDirectory, type ZipEntry } from '../zip';
import { readyExport } from './results';

const formats = ['spatialdata'] as const;

/** The SpatialData elements of the zipped export; its native prediction store stays behind. */
const ELEMENT_GROUPS = ['images/', 'labels/', 'tables/'];

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
      const url = manifest.artifacts.prediction?.downloadUrl;
      if (manifest.status !== 'ready' || !url) {
        process.exitCode = exitCodes.workFailed;
        ctx.print(() => `the export ${manifest.status}: ${manifest.error ?? ''}`, manifest);
        return;
      }
      const written = await writeSpatialData(ctx, client, url, dir);
      ctx.print(
        () =>
          `SpatialData store of job ${jobId} written to ${dir}: ${written.files} files (${formatBytes(written.bytes)}); open it with spatialdata.read_zarr("${dir}")`,
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
 * directory read with two ranged GETs, then the archive streamed once; `images/`, `labels/`
 * and `tables/` written as they are, the root `zarr.json` with SpatialData's attributes only
 * (its NGFF copy of the prediction names the native `markers/` arrays, which stay behind: the
 * same pixels are the `prediction` image). Each file goes to `FILE.part`, then its name.
 */
async function writeSpatialData(ctx: Context, client: SpsClient, url: string, dir: string) {
  const get = async (range?: string) =>
    client.transport.send({
      method: 'GET',
      url,
      headers: range ? { range } : {},
      signal: ctx.signal,
      bearer: false,
    });
  const entries = (
    await readZipDirectory(async (range) => new Uint8Array(await (await get(range)).arrayBuffer()))
  ).filter(
    (entry) => entry.name === 'zarr.json' || ELEMENT_GROUPS.some((group) => entry.name.startsWith(group)),
  );
  if (!entries.some((entry) => entry.name === 'zarr.json'))
    throw new SpsError('invalid_response', 'the zip has no root zarr.json');
  const progress = ctx.progress();
  const bar = progress.bar(`download ${entries.length} files`, { total: entries.length, bytes: false });
  let files = 0;
  let bytes = 0;
  const root = path.resolve(dir);
  const write = async (entry: ZipEntry, data: AsyncIterable<Buffer>) => {
    const target = path.resolve(root, entry.name);
    if (!target.startsWith(root + path.sep)) {
      throw new SpsError('invalid_response', `refusing a key outside the folder: ${entry.name}`);
    }
    await mkdir(path.dirname(target), { recursive: true });
    if (entry.name === 'zarr.json') {
      const pieces: Buffer[] = [];
      for await (const piece of data) pieces.push(piece);
      await writeFileAtomic(target, spatialDataRoot(Buffer.concat(pieces)), 0o644);
    } else {
      await pipeline(Readable.from(data), createWriteStream(`${target}.part`), { signal: ctx.signal });
      await rename(`${target}.part`, target);
    }
    bytes += entry.size;
    bar.update(++files, formatBytes(bytes));
  };
  try {
    const body = (await get()).body;
    if (!body) throw new SpsError('invalid_response', 'the export answered no body');
    await extractStoredEntries(Readable.fromWeb(body as WebReadableStream<Uint8Array>), entries, write);
    bar.done(formatBytes(bytes));
  } finally {
    progress.stop();
  }
  return { files, bytes };
}

/** The zip's root group with only SpatialData's container attributes. */
function spatialDataRoot(bytes: Buffer): string {
  const group = JSON.parse(bytes.toString('utf8')) as { attributes?: Record<string, unknown> };
  const spatialdata = group.attributes?.spatialdata_attrs;
  if (spatialdata === undefined) throw new SpsError('invalid_response', 'the zip is not a SpatialData store');
  return `${JSON.stringify({ zarr_format: 3, node_type: 'group', attributes: { spatialdata_attrs: spatialdata } }, null, 2)}\n`;
}
