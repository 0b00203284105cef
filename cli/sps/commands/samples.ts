import { type Command, Option } from 'commander';
import { endOfDay, listStatuses, workflowFacets } from '../../../schemas/samples';
import { isActiveSegmentationStatus } from '../../../schemas/segmentation';
import { ingestFailure, type SpsClient } from '../../../sdk';
import { UsageError } from '../config';
import type { Context } from '../context';
import { fieldClause, fieldValue, micronsPerPixel, wholeNumber } from '../flags';
import { formatBytes, formatRecord, formatTable } from '../output';
import { jobTable } from './jobs';

const collect = (value: string, previous: string[] = []) => [...previous, value];
/** `--at` given as a day, not a date-time. */
const DAY = /^\d{4}-\d{2}-\d{2}$/;

interface ListFlags {
  scope?: 'mine' | 'public' | 'all';
  q?: string;
  status?: string[];
  workflow?: string[];
  marker?: string[];
  field?: string[];
  uploadedFrom?: string;
  uploadedTo?: string;
  limit?: string;
  cursor?: string;
  all?: boolean;
  trash?: boolean;
}

interface ExpireFlags {
  at?: string;
  never?: boolean;
  orgDefault?: boolean;
  reason?: string;
}

function listRow(item: {
  id: string;
  name: string | null;
  filename: string;
  status: string;
  fileSize: string;
  createdAt: string;
}) {
  return {
    id: item.id,
    name: item.name ?? item.filename,
    status: item.status,
    size: formatBytes(Number(item.fileSize)),
    created: item.createdAt.slice(0, 19).replace('T', ' '),
  };
}

type SampleDetail = Awaited<ReturnType<SpsClient['samples']['get']>>;

/**
 * Hints on stderr after a change of scale: the service segments again at it by itself, and
 * predictions made before keep the scale the model saw the slide at.
 */
function hintRescaled(before: SampleDetail, after: SampleDetail): void {
  if (before.mpp === after.mpp || after.status !== 'ready') return;
  const segmentation = before.segmentation.status;
  if (segmentation === 'completed')
    process.stderr.write(
      `hint: the segmentation is made again at the new scale by itself; \`sps segment ${after.id} --wait\` follows it\n`,
    );
  else if (isActiveSegmentationStatus(segmentation))
    process.stderr.write(
      `hint: the running segmentation keeps the old scale; once it ends, \`sps segment ${after.id}\` makes it again at this one\n`,
    );
  const predicted = before.jobs.filter((job) => job.status === 'completed').length;
  if (predicted > 0)
    process.stderr.write(
      `hint: ${predicted} prediction(s) made before keep the old scale; predict again for markers at this one\n`,
    );
}

/** What `samples ls` says when it lists nothing: how to begin, or that the filters left nothing. */
function emptyList(flags: ListFlags): string {
  const { scope, limit, cursor, all, trash, ...facets } = flags;
  if (Object.values(facets).some((value) => value !== undefined)) return 'No sample matches these filters.';
  if (scope === 'public') return 'No public samples yet.';
  return 'No samples yet: upload slides with `sps upload FILE...` (or the web app).';
}

/** `samples ls --field` clauses, each field named by its key among the organization's fields. */
async function fieldClauses(client: SpsClient, clauses: string[], signal: AbortSignal): Promise<string[]> {
  const { fields } = await client.samples.fields({ signal });
  return clauses.map((clause) => fieldClause(clause, fields));
}

export function registerSamples(program: Command, context: () => Context): void {
  const samples = program
    .command('samples')
    .description('List, show, edit, trash, restore and expire samples');

  samples
    .command('ls')
    .alias('list')
    .description('List samples, newest first; every facet of the web list is a flag (facets AND together)')
    .addOption(new Option('--scope <scope>', 'whose samples').choices(['mine', 'public', 'all']))
    .option('--q <text>', 'name or filename contains')
    .addOption(
      new Option('--status <status>', 'status (repeatable, OR)').choices(listStatuses).argParser(collect),
    )
    .addOption(
      new Option('--workflow <state>', 'workflow state (repeatable, OR)')
        .choices(workflowFacets)
        .argParser(collect),
    )
    .option(
      '--marker <NAME:state>',
      'marker requested or completed, e.g. CD3:completed (repeatable, AND)',
      collect,
    )
    .option(
      '--field <KEY:op[:VALUE]>',
      'field clause, e.g. tags:contains:tumor, stage:eq:II, score:gte:3, site:is_empty (repeatable, AND; keys: sps samples fields)',
      collect,
    )
    .option('--uploaded-from <YYYY-MM-DD>', 'uploaded on or after this UTC day')
    .option('--uploaded-to <YYYY-MM-DD>', 'uploaded on or before this UTC day')
    .option('--limit <n>', 'page size (1 to 100)')
    .option('--cursor <cursor>', 'continue after a page (its nextCursor)')
    .option('--all', 'follow every page')
    .option('--trash', 'list the samples in Trash instead')
    .action(async (flags: ListFlags) => {
      const ctx = context();
      const { client } = await ctx.connect();
      if (flags.trash) {
        const page = await client.samples.listTrash(
          {
            limit: flags.limit === undefined ? undefined : wholeNumber('--limit', flags.limit),
            cursor: flags.cursor,
          },
          { signal: ctx.signal },
        );
        ctx.print(
          () =>
            page.items.length === 0 && !flags.cursor
              ? 'Nothing is in Trash.'
              : formatTable(
                  page.items.map((item) => ({ ...listRow(item), purge: item.purgeAt.slice(0, 10) })),
                ),
          page,
        );
        return;
      }
      const query = {
        scope: flags.scope,
        q: flags.q,
        status: flags.status as (typeof listStatuses)[number][] | undefined,
        workflow: flags.workflow as (typeof workflowFacets)[number][] | undefined,
        marker: flags.marker,
        field: flags.field && (await fieldClauses(client, flags.field, ctx.signal)),
        uploaded_from: flags.uploadedFrom,
        uploaded_to: flags.uploadedTo,
        limit: flags.limit === undefined ? undefined : wholeNumber('--limit', flags.limit),
      };
      let page = await client.samples.list({ ...query, cursor: flags.cursor }, { signal: ctx.signal });
      const items = [...page.items];
      while (flags.all && page.nextCursor) {
        page = await client.samples.list({ ...query, cursor: page.nextCursor }, { signal: ctx.signal });
        items.push(...page.items);
      }
      ctx.print(
        () => {
          if (items.length === 0 && !flags.cursor) return emptyList(flags);
          const table = formatTable(items.map(listRow));
          return page.nextCursor && !flags.all ? `${table}\n(more: --cursor ${page.nextCursor})` : table;
        },
        { items, nextCursor: page.nextCursor, appUrl: page.appUrl },
      );
    });

  samples
    .command('fields')
    .description("The organization's sample fields: the keys of `ls --field` and `edit --field`")
    .action(async () => {
      const ctx = context();
      const { client } = await ctx.connect();
      const answer = await client.samples.fields({ signal: ctx.signal });
      ctx.print(
        () =>
          formatTable(
            answer.fields.map((field) => ({
              key: field.key,
              label: field.label,
              type: field.valueType,
              options: field.options.join(',') || '-',
              writable: field.writable ? 'yes' : 'no',
              id: field.id,
            })),
          ),
        answer,
      );
    });

  samples
    .command('show')
    .description('One sample with its jobs')
    .argument('<id>')
    .action(async (id: string) => {
      const ctx = context();
      const { client } = await ctx.connect();
      const sample = await client.samples.get(id, { signal: ctx.signal });
      const failure = await ingestFailure(client, sample, { signal: ctx.signal });
      ctx.print(() => {
        const { jobs, segmentation, fields, fileSize, ...rest } = sample;
        const size = `${formatBytes(Number(fileSize))} (${fileSize} bytes)`;
        const head = formatRecord({ ...rest, fileSize: size, fields, segmentation: segmentation.status });
        const why = failure === null ? '' : `\n\nWhy it failed: ${failure}`;
        return `${head}${why}\n\nJobs (${sample.jobCount}):\n${jobTable(jobs)}`;
      }, sample);
    });

  samples
    .command('edit')
    .description('Change the name, mpp or fields (each field value replaces the whole field)')
    .argument('<id>')
    .option('--name <name>', 'display name ("" reverts to the filename)')
    .option('--mpp <microns>', 'microns per pixel')
    .option('--tags <a,b,...>', 'the complete tag set ("" clears it)')
    .option(
      '--field <key=VALUE>',
      'a field value: text (stage=II), or JSON (score=3, reviewed=true, panel=\'["a","b"]\'; null clears)',
      collect,
    )
    .action(async (id: string, flags: { name?: string; mpp?: string; tags?: string; field?: string[] }) => {
      const ctx = context();
      const { client } = await ctx.connect();
      const fields: Record<string, unknown> = Object.fromEntries((flags.field ?? []).map(fieldValue));
      const mpp = flags.mpp === undefined ? undefined : micronsPerPixel(flags.mpp);
      if (flags.tags !== undefined) fields.tags = flags.tags === '' ? [] : flags.tags.split(',');
      const before = mpp === undefined ? undefined : await client.samples.get(id, { signal: ctx.signal });
      const sample = await client.samples.update(
        id,
        {
          ...(flags.name === undefined ? {} : { name: flags.name }),
          ...(mpp === undefined ? {} : { mpp }),
          ...(Object.keys(fields).length === 0 ? {} : { fields }),
        },
        { signal: ctx.signal },
      );
      ctx.print(
        () => formatRecord({ id: sample.id, name: sample.name, mpp: sample.mpp, fields: sample.fields }),
        sample,
      );
      if (before) hintRescaled(before, sample);
    });

  samples
    .command('trash')
    .description('Move a sample to Trash now (restorable for 7 days)')
    .argument('<id>')
    .action(async (id: string) => {
      const ctx = context();
      const { client } = await ctx.connect();
      const sample = await client.samples.trash(id, { signal: ctx.signal });
      ctx.print(() => `${sample.id} trashed at ${sample.trashedAt}`, sample);
    });

  samples
    .command('restore')
    .description('Restore a sample from Trash')
    .argument('<id>')
    .action(async (id: string) => {
      const ctx = context();
      const { client } = await ctx.connect();
      const restored = await client.samples.restore(id, { signal: ctx.signal });
      ctx.print(() => `${restored.id} restored; expires ${restored.expiresAt ?? 'never'}`, restored);
    });

  samples
    .command('expire')
    .description('Set when samples move to Trash: a date, never, or the organization default')
    .argument('<ids...>')
    .option('--at <date>', 'a day, kept to its end in UTC (2027-01-31), or an ISO 8601 date-time')
    .option('--never', 'never expire (pin)')
    .option('--org-default', "follow the organization's default policy")
    .option('--reason <text>', 'why (kept in the audit trail)')
    .action(async (ids: string[], flags: ExpireFlags) => {
      const ctx = context();
      const chosen = [flags.at !== undefined, flags.never === true, flags.orgDefault === true].filter(
        Boolean,
      );
      if (chosen.length !== 1) throw new UsageError('give exactly one of --at, --never, --org-default');
      const change = {
        ...(flags.at === undefined ? {} : { expiresAt: DAY.test(flags.at) ? endOfDay(flags.at) : flags.at }),
        ...(flags.never ? { neverExpire: true as const } : {}),
        ...(flags.orgDefault ? { useOrgDefault: true as const } : {}),
        ...(flags.reason === undefined ? {} : { reason: flags.reason }),
      };
      const { client } = await ctx.connect();
      if (ids.length === 1) {
        const result = await client.samples.setExpiration(ids[0]!, change, { signal: ctx.signal });
        ctx.print(
          () =>
            `${result.id} expires ${result.expiresAt ?? 'never'} (${result.expiresAtSource ?? 'no policy'})`,
          result,
        );
        return;
      }
      const result = await client.samples.setExpirationBulk(
        { sampleIds: ids, ...change },
        { signal: ctx.signal },
      );
      ctx.print(() => `${result.updated} samples updated (batch ${result.batchId})`, result);
    });
}
