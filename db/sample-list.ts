import type postgres from 'postgres';
import type { FieldDefinition, FieldOperator } from '../schemas/samples';
import type { Queryable } from './index';
import type { PagePosition } from './samples';

/** A field facet with its definition resolved and its value checked against the type. */
export interface FieldClause {
  definition: Pick<FieldDefinition, 'id' | 'valueType' | 'storage'>;
  operator: FieldOperator;
  value?: string | number | boolean;
}

export interface SampleListFilter {
  organizationId: string;
  q?: string;
  uploadedFrom?: string;
  uploadedTo?: string;
  statuses?: string[];
  workflows?: ('ready_no_job' | 'in_flight' | 'has_results')[];
  markers?: { name: string; state: 'requested' | 'completed' }[];
  fields?: FieldClause[];
}

export interface SampleListRow {
  id: string;
  name: string | null;
  filename: string;
  status: string;
  fileSize: string;
  createdAt: Date;
  trashedAt: Date | null;
  position: PagePosition;
}

type Fragment = postgres.PendingQuery<postgres.Row[]>;

const ACTIVE_JOB_STATUSES = ['queued', 'dispatching', 'preprocessing', 'running', 'postprocessing'];
const RESULT_JOB_STATUSES = ['completed', 'partial_failed'];

function likePattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (char) => `\\${char}`)}%`;
}

function and(sql: Queryable, parts: Fragment[]): Fragment {
  return parts.reduce((joined, part) => sql`${joined} AND ${part}`, sql`TRUE`);
}

function or(sql: Queryable, parts: Fragment[]): Fragment {
  return sql`(${parts.slice(1).reduce((joined, part) => sql`${joined} OR ${part}`, parts[0]!)})`;
}

function workflowCondition(
  sql: Queryable,
  workflow: NonNullable<SampleListFilter['workflows']>[number],
): Fragment {
  switch (workflow) {
    case 'ready_no_job':
      return sql`(s.status = 'ready' AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.sample_id = s.id))`;
    case 'in_flight':
      return sql`EXISTS (SELECT 1 FROM jobs j WHERE j.sample_id = s.id AND j.status = ANY(${ACTIVE_JOB_STATUSES}))`;
    case 'has_results':
      return sql`EXISTS (SELECT 1 FROM jobs j WHERE j.sample_id = s.id AND j.status = ANY(${RESULT_JOB_STATUSES}))`;
  }
}

function markerCondition(sql: Queryable, marker: NonNullable<SampleListFilter['markers']>[number]): Fragment {
  const statuses = marker.state === 'completed' ? sql`AND j.status = ANY(${RESULT_JOB_STATUSES})` : sql``;
  return sql`EXISTS (SELECT 1 FROM jobs j WHERE j.sample_id = s.id AND j.markers @> ARRAY[${marker.name}]::text[] ${statuses})`;
}

/**
 * A facet on an organization field: a predicate on the sample's own `field_values` object.
 * Equality is containment (`@>`), which the GIN index serves; ranges compare the value cast
 * back to the type it was stored from.
 */
function valueCondition(sql: Queryable, clause: FieldClause): Fragment {
  const key = sql`${clause.definition.id}::text`;
  const { operator, value } = clause;
  if (operator === 'is_empty') return sql`NOT (s.field_values ? ${key})`;
  if (operator === 'is_not_empty') return sql`(s.field_values ? ${key})`;
  const contains = (json: Fragment) => sql`s.field_values @> jsonb_build_object(${key}, ${json})`;
  const compare = { gte: sql`>=`, lte: sql`<=` } as const;
  switch (clause.definition.valueType) {
    case 'text':
      return operator === 'contains'
        ? sql`(s.field_values ->> ${key}) ILIKE ${likePattern(String(value))}`
        : contains(sql`${String(value)}::text`);
    case 'select':
      return contains(sql`${String(value)}::text`);
    case 'number':
      return operator === 'eq'
        ? contains(sql`${Number(value)}::float8`)
        : sql`(s.field_values ->> ${key})::float8 ${compare[operator as keyof typeof compare]} ${Number(value)}::float8`;
    case 'date':
      return operator === 'eq'
        ? contains(sql`to_char(${String(value)}::date, 'YYYY-MM-DD')`)
        : sql`(s.field_values ->> ${key})::date ${compare[operator as keyof typeof compare]} ${String(value)}::date`;
    case 'boolean':
      return contains(sql`${Boolean(value)}::boolean`);
    case 'multi_select':
      return contains(sql`jsonb_build_array(${String(value)}::text)`);
    case 'tags':
      throw new Error('tags are stored in the tag table');
  }
}

function fieldCondition(sql: Queryable, clause: FieldClause): Fragment {
  const { operator, value } = clause;
  if (clause.definition.storage === 'tag_table') {
    const anyTag = sql`EXISTS (SELECT 1 FROM sample_tags t WHERE t.sample_id = s.id)`;
    if (operator === 'is_empty') return sql`NOT ${anyTag}`;
    if (operator === 'is_not_empty') return anyTag;
    return sql`EXISTS (SELECT 1 FROM sample_tags t WHERE t.sample_id = s.id AND t.tag = ${String(value).trim().toLowerCase()})`;
  }
  if (clause.definition.storage === 'column') {
    // `public` always has a value: a sample is public or it is not.
    if (operator === 'is_empty') return sql`FALSE`;
    if (operator === 'is_not_empty') return sql`TRUE`;
    return sql`((s.public_id IS NOT NULL) = ${Boolean(value)})`;
  }
  return valueCondition(sql, clause);
}

/** The organization's active samples after `after`, within the upload-date bounds. */
function scopeConditions(sql: Queryable, filter: SampleListFilter, after?: PagePosition): Fragment {
  const parts: Fragment[] = [
    sql`s.organization_id = ${filter.organizationId}`,
    sql`s.trashed_at IS NULL`,
    sql`s.archived_at IS NULL`,
  ];
  if (filter.uploadedFrom)
    parts.push(sql`s.created_at >= (${filter.uploadedFrom}::date)::timestamp AT TIME ZONE 'UTC'`);
  if (filter.uploadedTo)
    parts.push(sql`s.created_at < (${filter.uploadedTo}::date + 1)::timestamp AT TIME ZONE 'UTC'`);
  if (after) parts.push(sql`(s.created_at, s.id) < (${after.createdAt}::timestamptz, ${after.id}::uuid)`);
  return and(sql, parts);
}

/** Every other facet composed with AND; statuses and workflows are OR lists inside their facet. */
function facetConditions(sql: Queryable, filter: SampleListFilter): Fragment {
  const parts: Fragment[] = [];
  if (filter.q) parts.push(sql`s.search_text LIKE lower(${likePattern(filter.q)})`);
  if (filter.statuses?.length) parts.push(sql`s.status = ANY(${filter.statuses})`);
  if (filter.workflows?.length)
    parts.push(
      or(
        sql,
        filter.workflows.map((workflow) => workflowCondition(sql, workflow)),
      ),
    );
  for (const marker of filter.markers ?? []) parts.push(markerCondition(sql, marker));
  for (const clause of filter.fields ?? []) parts.push(fieldCondition(sql, clause));
  return and(sql, parts);
}

const listColumns = (sql: Queryable) => sql`
  s.id, s.name, s.filename, s.status, s.file_size AS "fileSize", s.created_at AS "createdAt",
  s.trashed_at AS "trashedAt",
  to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS "exactCreatedAt"`;

type ListRow = Omit<SampleListRow, 'position'> & { exactCreatedAt: string };

function withPosition(rows: ListRow[]): SampleListRow[] {
  return rows.map(({ exactCreatedAt, ...row }) => ({
    ...row,
    position: { createdAt: exactCreatedAt, id: row.id },
  }));
}

/** How many of the newest rows the walk reads before it hands the rest to the planner. */
const WALK_ROWS = 1000;

/** Runs one query of a listing; the benchmark's variant also records its plan. */
type Run = (query: Fragment) => Promise<readonly postgres.Row[]>;

/**
 * Every facet handed to the planner at once. The planner cannot estimate a field facet (one
 * jsonb key of one organization), so this is the right plan only when the facets are rare:
 * then an index (trigram, field GIN, status) finds every match and a top-N sort is cheap.
 */
function plainQuery(sql: Queryable, filter: SampleListFilter, limit: number, after?: PagePosition) {
  return sql`
    SELECT ${listColumns(sql)} FROM samples s
    WHERE ${scopeConditions(sql, filter, after)} AND ${facetConditions(sql, filter)}
    ORDER BY s.created_at DESC, s.id DESC
    LIMIT ${limit}`;
}

/**
 * The newest `walk` rows of the scope, read in index order, with the facets checked on each:
 * it stops at `limit` matches. The last row of the walk is returned even when it does not
 * match (`walkEnd`), so the caller knows where the walk stopped.
 */
function walkQuery(
  sql: Queryable,
  filter: SampleListFilter,
  limit: number,
  walk: number,
  after?: PagePosition,
) {
  return sql`
    SELECT ${listColumns(sql)}, s.walked = ${walk} AS "walkEnd",
      CASE WHEN s.walked = ${walk} THEN ${facetConditions(sql, filter)} ELSE TRUE END AS matches
    FROM (
      SELECT s.*, row_number() OVER (ORDER BY s.created_at DESC, s.id DESC) AS walked FROM samples s
      WHERE ${scopeConditions(sql, filter, after)}
      ORDER BY s.created_at DESC, s.id DESC
      LIMIT ${walk}
    ) s
    WHERE ${facetConditions(sql, filter)} OR s.walked = ${walk}
    ORDER BY s.created_at DESC, s.id DESC
    LIMIT ${limit}`;
}

/**
 * One page of the organization's active samples, newest first (keyset pagination). Common
 * facets match many of the newest rows, so a walk of the newest `walk` rows in index order
 * usually fills the page; only when it does not is the rest, after the walk, left to the plain
 * query, whose plan then suits rare facets. `walk` 0 runs the plain query alone (the reference
 * the walk is tested against).
 */
async function listWith(
  run: Run,
  sql: Queryable,
  filter: SampleListFilter,
  page: { limit: number; after?: PagePosition },
  walk: number,
): Promise<SampleListRow[]> {
  if (walk === 0)
    return withPosition((await run(plainQuery(sql, filter, page.limit, page.after))) as ListRow[]);
  const walked = (await run(walkQuery(sql, filter, page.limit, walk, page.after))) as (ListRow & {
    walkEnd: boolean;
    matches: boolean;
  })[];
  const rows = walked.filter((row) => row.matches).map(({ walkEnd, matches, ...row }) => row);
  const end = walked.find((row) => row.walkEnd);
  if (rows.length === page.limit || !end) return withPosition(rows);
  const [next] = withPosition([end]);
  const rest = (await run(plainQuery(sql, filter, page.limit - rows.length, next!.position))) as ListRow[];
  return withPosition([...rows, ...rest]);
}

/** One page of the organization's active samples, newest first (keyset pagination). */
export function listSamples(
  sql: Queryable,
  filter: SampleListFilter,
  page: { limit: number; after?: PagePosition },
  walk = WALK_ROWS,
): Promise<SampleListRow[]> {
  return listWith(async (query) => await query, sql, filter, page, walk);
}

/** One list call with the plan (EXPLAIN ANALYZE, BUFFERS) of each query it ran, for the benchmark. */
export async function explainListSamples(
  sql: Queryable,
  filter: SampleListFilter,
  page: { limit: number; after?: PagePosition },
): Promise<{ rows: SampleListRow[]; plans: string[] }> {
  const plans: string[] = [];
  const run: Run = async (query) => {
    const plan = await sql<{ 'QUERY PLAN': string }[]>`EXPLAIN (ANALYZE, BUFFERS) ${query}`;
    plans.push(plan.map((row) => row['QUERY PLAN']).join('\n'));
    return await query;
  };
  return { rows: await listWith(run, sql, filter, page, WALK_ROWS), plans };
}

/** One page of the organization's Trash, most recently trashed first. */
export async function listTrash(
  sql: Queryable,
  organizationId: string,
  page: { limit: number; after?: PagePosition },
): Promise<SampleListRow[]> {
  const after = page.after
    ? sql`AND (s.trashed_at, s.id) < (${page.after.createdAt}::timestamptz, ${page.after.id}::uuid)`
    : sql``;
  const rows = await sql<(Omit<SampleListRow, 'position'> & { exactCreatedAt: string })[]>`
    SELECT s.id, s.name, s.filename, s.status, s.file_size AS "fileSize", s.created_at AS "createdAt",
      s.trashed_at AS "trashedAt",
      to_char(s.trashed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS "exactCreatedAt"
    FROM samples s
    WHERE s.organization_id = ${organizationId} AND s.trashed_at IS NOT NULL ${after}
    ORDER BY s.trashed_at DESC, s.id DESC
    LIMIT ${page.limit}`;
  return withPosition(rows);
}
