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

function valueTableCondition(sql: Queryable, clause: FieldClause): Fragment {
  const exists = (condition: Fragment) =>
    sql`EXISTS (SELECT 1 FROM sample_field_values v WHERE v.sample_id = s.id AND v.definition_id = ${clause.definition.id} AND ${condition})`;
  const { operator, value } = clause;
  if (operator === 'is_empty') return sql`NOT ${exists(sql`TRUE`)}`;
  if (operator === 'is_not_empty') return exists(sql`TRUE`);
  const compare = { eq: sql`=`, gte: sql`>=`, lte: sql`<=` } as const;
  switch (clause.definition.valueType) {
    case 'text':
      return operator === 'contains'
        ? exists(sql`v.value_text ILIKE ${likePattern(String(value))}`)
        : exists(sql`v.value_text = ${String(value)}`);
    case 'select':
      return exists(sql`v.value_text = ${String(value)}`);
    case 'number':
      return exists(sql`v.value_number ${compare[operator as keyof typeof compare]} ${Number(value)}`);
    case 'date':
      return exists(sql`v.value_date ${compare[operator as keyof typeof compare]} ${String(value)}::date`);
    case 'boolean':
      return exists(sql`v.value_boolean = ${Boolean(value)}`);
    case 'multi_select':
      return exists(sql`v.value_options @> ARRAY[${String(value)}]::text[]`);
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
  return valueTableCondition(sql, clause);
}

/** Every facet composed with AND; statuses and workflows are OR lists inside their facet. */
function filterConditions(sql: Queryable, filter: SampleListFilter): Fragment {
  const parts: Fragment[] = [
    sql`s.organization_id = ${filter.organizationId}`,
    sql`s.trashed_at IS NULL`,
    sql`s.archived_at IS NULL`,
  ];
  if (filter.q) parts.push(sql`s.search_text LIKE lower(${likePattern(filter.q)})`);
  if (filter.uploadedFrom)
    parts.push(sql`s.created_at >= (${filter.uploadedFrom}::date)::timestamp AT TIME ZONE 'UTC'`);
  if (filter.uploadedTo)
    parts.push(sql`s.created_at < (${filter.uploadedTo}::date + 1)::timestamp AT TIME ZONE 'UTC'`);
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

function withPosition(
  rows: (Omit<SampleListRow, 'position'> & { exactCreatedAt: string })[],
): SampleListRow[] {
  return rows.map(({ exactCreatedAt, ...row }) => ({
    ...row,
    position: { createdAt: exactCreatedAt, id: row.id },
  }));
}

/** One page of the organization's active samples, newest first (keyset pagination). */
export async function listSamples(
  sql: Queryable,
  filter: SampleListFilter,
  page: { limit: number; after?: PagePosition },
): Promise<SampleListRow[]> {
  const after = page.after
    ? sql`AND (s.created_at, s.id) < (${page.after.createdAt}::timestamptz, ${page.after.id}::uuid)`
    : sql``;
  const rows = await sql<(Omit<SampleListRow, 'position'> & { exactCreatedAt: string })[]>`
    SELECT ${listColumns(sql)} FROM samples s
    WHERE ${filterConditions(sql, filter)} ${after}
    ORDER BY s.created_at DESC, s.id DESC
    LIMIT ${page.limit}`;
  return withPosition(rows);
}

/** The query plan of a list call, for the benchmark. */
export async function explainListSamples(
  sql: Queryable,
  filter: SampleListFilter,
  limit: number,
): Promise<string> {
  const rows = await sql<{ 'QUERY PLAN': string }[]>`
    EXPLAIN (ANALYZE, BUFFERS) SELECT ${listColumns(sql)} FROM samples s
    WHERE ${filterConditions(sql, filter)} ORDER BY s.created_at DESC, s.id DESC LIMIT ${limit}`;
  return rows.map((row) => row['QUERY PLAN']).join('\n');
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
