import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import type { Command } from 'commander';
import type { Upload } from '../../../schemas/uploads';
import { type SpsClient, slideFileProblem, uploadSource, waitForIngest } from '../../../sdk';
import { fileSource } from '../../../sdk/node';
import { UsageError } from '../config';
import type { Context } from '../context';
import { exitCodes } from '../exit-codes';
import { micronsPerPixel, wholeNumber } from '../flags';
import { formatBytes, formatTable } from '../output';
import { fileKey, uploadState } from '../upload-state';

interface UploadFlags {
  wait?: boolean;
  name?: string;
  mpp?: string;
  autoSegment?: boolean;
  chunkMib: string;
  parallel: string;
}

type Source = Awaited<ReturnType<typeof fileSource>>;

/**
 * Each file opened for reading before anything is sent: every one that cannot be, or that is
 * no slide the service reads (empty, a copy that failed; another kind of file), is named.
 */
async function readableSources(files: string[]): Promise<Source[]> {
  const problems: string[] = [];
  const sources: Source[] = [];
  for (const file of files) {
    try {
      await access(file, constants.R_OK);
      if ((await stat(file)).isDirectory()) {
        problems.push(`${file}: ${FOLDER}`);
        continue;
      }
      const source = await fileSource(file);
      const problem = await slideFileProblem(source);
      if (problem) problems.push(`${file}: ${problem}`);
      else sources.push(source);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // Without a code it is the SDK's own refusal, which names the file ("… is not a file").
      problems.push(code ? `${file}: ${reasons[code] ?? code}` : (err as Error).message);
    }
  }
  if (problems.length > 0) throw new UsageError(`nothing was uploaded: ${problems.join('; ')}`);
  return sources;
}

const FOLDER = "a folder: give the slide files in it (a DICOM slide's level-0 instance: its largest file)";

const reasons: Record<string, string> = {
  ENOENT: 'no such file',
  EACCES: 'not readable (permission denied)',
};

/**
 * A hint on stderr for each slide that became ready without a scale (its file gave none):
 * prediction and segmentation need one, and an `autoSegment` upload's segmentation waits for it.
 */
async function hintUnscaled(client: SpsClient, uploads: Upload[]): Promise<void> {
  const ready = uploads.filter((upload) => upload.status === 'ready');
  // A hint, not the upload: a sample that cannot be read now gets none.
  const samples = await Promise.all(ready.map((upload) => client.samples.get(upload.id).catch(() => null)));
  samples.forEach((sample, i) => {
    if (sample === null || sample.mpp !== null) return;
    const waits = ready[i]!.autoSegment ? ' (its segmentation starts once it has one)' : '';
    process.stderr.write(
      `hint: ${sample.filename} has no scale, which prediction and segmentation need${waits}: set it with \`sps samples edit ${sample.id} --mpp MICRONS_PER_PIXEL\`\n`,
    );
  });
}

/** The flags' numbers, checked: a wrong one is a usage error before any upload starts. */
function uploadSettings(flags: UploadFlags, fileCount: number) {
  const quarters = Number(flags.chunkMib) * 4;
  if (!Number.isInteger(quarters) || quarters < 1)
    throw new UsageError(`--chunk-mib must be a positive multiple of 0.25, got ${flags.chunkMib}`);
  const parallel = wholeNumber('--parallel', flags.parallel);
  const mpp = flags.mpp === undefined ? undefined : micronsPerPixel(flags.mpp);
  if (flags.name !== undefined && fileCount > 1)
    throw new UsageError(`--name names one file; ${fileCount} were given`);
  return { chunkBytes: quarters * 256 * 1024, parallel: Math.min(parallel, fileCount), mpp };
}

export function registerUpload(program: Command, context: () => Context): void {
  program
    .command('upload')
    .description('Upload slides (resumable: a rerun continues an interrupted upload)')
    .argument('<files...>', 'slide files')
    .option('--wait', 'wait until each sample is ready (or failed)')
    .option('--name <name>', 'display name (one file only)')
    .option('--mpp <microns>', 'microns per pixel, when the slide lacks it')
    .option('--no-auto-segment', 'do not segment cells after ingest')
    .option('--chunk-mib <n>', 'MiB per request (a multiple of 0.25)', '64')
    .option('--parallel <n>', 'files uploaded at once', '3')
    .action(async (files: string[], flags: UploadFlags) => {
      const settings = uploadSettings(flags, files.length);
      const sources = await readableSources(files);
      const ctx = context();
      const { client, login } = await ctx.connect();
      const state = uploadState();
      const progress = ctx.progress();
      const results: Upload[] = [];
      let next = 0;
      const uploadOne = async (file: string, source: Source) => {
        const key = fileKey(login.baseUrl, file, source.size, source.mtimeMs);
        const resume = await state.find(key);
        let bar: ReturnType<typeof progress.bar> | undefined;
        const upload = await uploadSource(client, source, {
          resume,
          name: flags.name,
          mpp: settings.mpp,
          autoSegment: flags.autoSegment === false ? false : undefined,
          chunkBytes: settings.chunkBytes,
          signal: ctx.signal,
          onSession: (session) => state.remember(key, session),
          onProgress: ({ sentBytes, totalBytes, resumedFrom }) => {
            bar ??= progress.bar(source.name, { total: totalBytes, bytes: true, startedAt: resumedFrom });
            bar.update(sentBytes, resumedFrom > 0 ? `(resumed at ${formatBytes(resumedFrom)})` : '');
          },
        });
        await state.forget(key);
        bar?.done('uploaded');
        results.push(flags.wait ? await waitForIngest(client, upload.id, { signal: ctx.signal }) : upload);
      };
      try {
        await Promise.all(
          Array.from({ length: settings.parallel }, async () => {
            while (next < files.length) {
              const index = next++;
              await uploadOne(files[index]!, sources[index]!);
            }
          }),
        );
      } finally {
        progress.stop();
      }
      // The reason column only when a slide failed: the service's own words for it.
      const failed = results.some((u) => u.statusMessage !== null);
      ctx.print(
        () =>
          formatTable(
            results.map((u) => ({
              id: u.id,
              file: u.filename,
              size: formatBytes(Number(u.fileSize)),
              status: u.status,
              ...(failed ? { reason: u.statusMessage } : {}),
            })),
          ),
        results,
      );
      if (flags.wait && !ctx.json) await hintUnscaled(client, results);
      if (flags.wait && results.some((u) => u.status !== 'ready')) process.exitCode = exitCodes.workFailed;
    });
}
