import type { Command } from 'commander';
import { preparingSampleStatuses } from '../../../schemas/enums';
import { isSpsError, type SpsClient } from '../../../sdk';
import type { Context } from '../context';
import { exitCodes } from '../exit-codes';
import { formatRecord } from '../output';
import { watchJob } from './jobs';

interface PredictFlags {
  markers: string;
  model?: string;
  dryRun?: boolean;
  yes?: boolean;
  wait?: boolean;
}

export function registerPredict(program: Command, context: () => Context): void {
  program
    .command('predict')
    .description('Price a prediction, ask, then submit it (reserves credits)')
    .argument('<sample>', 'sample id (an upload id)')
    .requiredOption('--markers <A,B,...>', 'marker names (see GET /markers)')
    .option('--model <version>', 'model version (default: the current one)')
    .option('--dry-run', 'print the price and balance only')
    .option('--yes', 'do not ask before spending')
    .option('--wait', 'follow the job to its end with a progress bar')
    .action(async (sample: string, flags: PredictFlags) => {
      const ctx = context();
      const { client } = await ctx.connect();
      const request = {
        uploadId: sample,
        markers: flags.markers.split(',').map((marker) => marker.trim()),
        ...(flags.model === undefined ? {} : { model: flags.model }),
      };
      let question: string;
      try {
        const estimate = await client.predictions.estimate(request, { signal: ctx.signal });
        const available = estimate.orgBalance - estimate.orgPending;
        const summary = formatRecord({
          patches: estimate.patchCount,
          markers: estimate.markerCount,
          price: `${estimate.estimatedCredits} credits`,
          balance: `${estimate.orgBalance} credits (${estimate.orgPending} pending, ${available} available)`,
        });
        if (flags.dryRun) {
          ctx.print(() => summary, estimate);
          return;
        }
        if (!ctx.json) process.stderr.write(`${summary}\n`);
        question = `Spend ${estimate.estimatedCredits} credits?`;
      } catch (err) {
        // Before the sample is ready there is no exact price; a submission reserves an upper
        // bound and settles to the exact price once the tissue is found. A sample that failed,
        // is in Trash or still uploading will not be ready by itself: the service's reason stands.
        if (flags.dryRun || !isSpsError(err, 'sample_not_ready')) throw err;
        if (!(await isBeingPrepared(client, sample, ctx.signal))) throw err;
        process.stderr.write(
          'The sample is not ready yet: the exact price is known once its tissue is found.\n',
        );
        question = 'Submit now, reserving an upper bound that settles to the exact price?';
      }
      if (!flags.yes && !(await ctx.confirm(question))) {
        process.stderr.write('Nothing submitted.\n');
        process.exitCode = exitCodes.declined;
        return;
      }
      const submitted = await client.predictions.submit(request, { signal: ctx.signal });
      if (!flags.wait) {
        ctx.print(
          () =>
            formatRecord({
              job: submitted.jobId,
              status: submitted.status,
              reserved: submitted.reservedCredits,
            }),
          submitted,
        );
        return;
      }
      if (!ctx.json)
        process.stderr.write(
          `job ${submitted.jobId} queued, ${submitted.reservedCredits} credits reserved\n`,
        );
      const job = await watchJob(ctx, client, submitted.jobId);
      ctx.print(
        () =>
          formatRecord({
            job: job.id,
            status: job.status,
            credits: job.reservedCredits,
            error: job.errorMessage,
          }),
        job,
      );
    });
}

async function isBeingPrepared(client: SpsClient, sampleId: string, signal: AbortSignal): Promise<boolean> {
  const sample = await client.samples.get(sampleId, { signal });
  return sample.trashedAt === null && preparingSampleStatuses.has(sample.status);
}
