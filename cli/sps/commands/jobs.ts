import type { Command } from 'commander';
import type { JobStatusBody } from '../../../schemas/jobs';
import type { SampleJob } from '../../../schemas/samples';
import { type SpsClient, waitForJob } from '../../../sdk';
import type { Context } from '../context';
import { exitCodes } from '../exit-codes';
import { formatRecord, formatTable } from '../output';

const failedStatuses = new Set(['failed', 'cancelled']);

/** Follows the job's stream with a progress bar; sets the exit code from how it ended. */
export async function watchJob(ctx: Context, client: SpsClient, jobId: string): Promise<JobStatusBody> {
  const progress = ctx.progress();
  const bar = progress.bar(`job ${jobId.slice(0, 8)}`, { total: 1, bytes: false });
  let job: JobStatusBody;
  try {
    job = await waitForJob(client, jobId, {
      signal: ctx.signal,
      onEvent: (event) => {
        bar.update(event.progress ?? (event.status === 'completed' ? 1 : 0), event.status);
      },
    });
    bar.done(job.status);
  } finally {
    progress.stop();
  }
  if (failedStatuses.has(job.status)) process.exitCode = exitCodes.workFailed;
  return job;
}

const percent = (progress: number | null) => (progress === null ? null : `${Math.round(progress * 100)}%`);

function jobRecord(job: JobStatusBody) {
  return { ...job, progress: percent(job.progress), markers: job.markers.join(',') };
}

/**
 * A sample's job table (`sps jobs ls`, `sps samples show`); a REASON column, the service's
 * `errorMessage`, when a job failed.
 */
export function jobTable(jobs: SampleJob[]): string {
  const failed = jobs.some((job) => job.errorMessage !== null);
  return formatTable(
    jobs.map((job) => ({
      job: job.id,
      status: job.status,
      progress: percent(job.progress),
      markers: job.markers.join(','),
      credits: job.reservedCredits,
      created: job.createdAt?.slice(0, 19).replace('T', ' '),
      ...(failed ? { reason: job.errorMessage } : {}),
    })),
  );
}

export function registerJobs(program: Command, context: () => Context): void {
  const jobs = program.command('jobs').description('Show, watch and cancel prediction jobs');

  jobs
    .command('ls')
    .alias('list')
    .description(
      "A sample's jobs, newest first (the API has no organization-wide job list: the jobs come from the sample)",
    )
    .requiredOption('--sample <id>', 'the sample whose jobs to list')
    .action(async (flags: { sample: string }) => {
      const ctx = context();
      const { client } = await ctx.connect();
      const sample = await client.samples.get(flags.sample, { signal: ctx.signal });
      ctx.print(
        () =>
          jobTable(sample.jobs) +
          (sample.jobCount > sample.jobs.length
            ? `\n(${sample.jobCount - sample.jobs.length} older not shown)`
            : ''),
        { jobs: sample.jobs, jobCount: sample.jobCount },
      );
    });

  jobs
    .command('show')
    .description('One job')
    .argument('<id>')
    .action(async (id: string) => {
      const ctx = context();
      const { client } = await ctx.connect();
      const job = await client.jobs.get(id, { signal: ctx.signal });
      ctx.print(() => formatRecord(jobRecord(job)), job);
    });

  jobs
    .command('watch')
    .description("Follow a job's live status until it ends (exit 9 when it failed or was cancelled)")
    .argument('<id>')
    .action(async (id: string) => {
      const ctx = context();
      const { client } = await ctx.connect();
      const job = await watchJob(ctx, client, id);
      ctx.print(() => formatRecord(jobRecord(job)), job);
    });

  jobs
    .command('cancel')
    .description('Cancel an active job; its credit reservation is released')
    .argument('<id>')
    .action(async (id: string) => {
      const ctx = context();
      const { client } = await ctx.connect();
      const result = await client.jobs.cancel(id, { signal: ctx.signal });
      ctx.print(() => `${result.id} cancelled`, result);
    });
}
