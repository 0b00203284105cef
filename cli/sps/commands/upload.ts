import type { Command } from 'commander';
import type { Upload } from '../../../schemas/uploads';
import { uploadSource, waitForIngest } from '../../../sdk';
import { fileSource } from '../../../sdk/node';
import type { Context } from '../context';
import { exitCodes } from '../exit-codes';
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
      const ctx = context();
      const { client, login } = await ctx.connect();
      const state = uploadState();
      const progress = ctx.progress();
      const results: Upload[] = [];
      let next = 0;
      const uploadOne = async (file: string) => {
        const source = await fileSource(file);
        const key = fileKey(login.baseUrl, file, source.size, source.mtimeMs);
        const resume = await state.find(key);
        let bar: ReturnType<typeof progress.bar> | undefined;
        const upload = await uploadSource(client, source, {
          resume,
          name: flags.name,
          mpp: flags.mpp === undefined ? undefined : Number(flags.mpp),
          autoSegment: flags.autoSegment === false ? false : undefined,
          chunkBytes: Math.round(Number(flags.chunkMib) * 4) * 256 * 1024,
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
          Array.from({ length: Math.min(Number(flags.parallel) || 1, files.length) }, async () => {
            while (next < files.length) await uploadOne(files[next++]!);
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
      if (flags.wait && results.some((u) => u.status !== 'ready')) process.exitCode = exitCodes.workFailed;
    });
}
