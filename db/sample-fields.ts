import type { FieldDefinition } from '../schemas/samples';
import type { Queryable } from './index';

const definitionColumns = `id, key, label, value_type AS "valueType", origin, storage, writable, options`;

/** The organization's active definitions: the system ones (tags, public) first. */
export async function listFieldDefinitions(
  sql: Queryable,
  organizationId: string,
): Promise<FieldDefinition[]> {
  return sql<FieldDefinition[]>`
    SELECT ${sql.unsafe(definitionColumns)} FROM sample_field_definitions
    WHERE (organization_id IS NULL OR organization_id = ${organizationId}) AND retired_at IS NULL
    ORDER BY organization_id NULLS FIRST, created_at, id`;
}

/** A new field of the organization; undefined when an active one already has its key. */
export async function insertFieldDefinition(
  sql: Queryable,
  input: {
    organizationId: string;
    key: string;
    label: string;
    valueType: FieldDefinition['valueType'];
    options: string[];
  },
): Promise<FieldDefinition | undefined> {
  const [row] = await sql<FieldDefinition[]>`
    INSERT INTO sample_field_definitions (organization_id, key, label, value_type, origin, storage, writable, options)
    VALUES (${input.organizationId}, ${input.key}, ${input.label}, ${input.valueType}, 'organization', 'value_table', true,
      ${input.options})
    ON CONFLICT (organization_id, key) WHERE retired_at IS NULL DO NOTHING
    RETURNING ${sql.unsafe(definitionColumns)}`;
  return row;
}

export async function retireFieldDefinition(
  sql: Queryable,
  organizationId: string,
  key: string,
): Promise<boolean> {
  const rows = await sql`UPDATE sample_field_definitions SET retired_at = now()
    WHERE organization_id = ${organizationId} AND key = ${key} AND retired_at IS NULL`;
  return rows.count === 1;
}

/** A stored field value, in the typed column its definition's value type uses. */
export type StoredFieldValue =
  | { kind: 'text'; value: string }
  | { kind: 'number'; value: number }
  | { kind: 'date'; value: string }
  | { kind: 'boolean'; value: boolean }
  | { kind: 'options'; value: string[] };

interface FieldsRow {
  id: string;
  isPublic: boolean;
  tags: string[];
  values: Record<string, unknown>;
}

/**
 * The `fields` object of each sample, keyed by definition key, in one query whatever the
 * number of samples: tags (sorted), the public flag, and the values of active definitions.
 */
export async function fieldValuesOf(
  sql: Queryable,
  sampleIds: string[],
): Promise<Map<string, Record<string, unknown>>> {
  const fields = new Map<string, Record<string, unknown>>(sampleIds.map((id) => [id, {}]));
  if (sampleIds.length === 0) return fields;
  const rows = await sql<FieldsRow[]>`
    SELECT s.id, s.public_id IS NOT NULL AS "isPublic",
      ARRAY(SELECT t.tag FROM sample_tags t WHERE t.sample_id = s.id ORDER BY t.tag) AS tags,
      coalesce((SELECT jsonb_object_agg(d.key, e.value) FROM jsonb_each(s.field_values) e
        JOIN sample_field_definitions d ON d.id = e.key::uuid AND d.retired_at IS NULL), '{}') AS values
    FROM samples s WHERE s.id = ANY(${sampleIds}::uuid[])`;
  for (const row of rows)
    Object.assign(fields.get(row.id)!, { tags: row.tags, public: row.isPublic }, row.values);
  return fields;
}

/** The jsonb of a stored value: dates as 'YYYY-MM-DD', numbers as float8 gives them. */
function jsonbOf(sql: Queryable, value: StoredFieldValue) {
  switch (value.kind) {
    case 'text':
      return sql`to_jsonb(${value.value}::text)`;
    case 'number':
      return sql`to_jsonb(${value.value}::float8)`;
    case 'date':
      return sql`to_jsonb(to_char(${value.value}::date, 'YYYY-MM-DD'))`;
    case 'boolean':
      return sql`to_jsonb(${value.value}::boolean)`;
    case 'options':
      return sql`to_jsonb(${value.value}::text[])`;
  }
}

/** Replaces one field's whole value; `null` clears it. */
export async function writeFieldValue(
  sql: Queryable,
  input: { sampleId: string; definitionId: string; value: StoredFieldValue | null },
): Promise<void> {
  const { sampleId, definitionId, value } = input;
  const written =
    value === null
      ? sql`field_values - ${definitionId}::text`
      : sql`field_values || jsonb_build_object(${definitionId}::text, ${jsonbOf(sql, value)})`;
  await sql`UPDATE samples SET field_values = ${written} WHERE id = ${sampleId}`;
}

/** Replaces the complete tag set. */
export async function replaceTags(sql: Queryable, sampleId: string, tags: string[]): Promise<void> {
  await sql`DELETE FROM sample_tags WHERE sample_id = ${sampleId} AND NOT (tag = ANY(${tags}::text[]))`;
  if (tags.length > 0) {
    await sql`INSERT INTO sample_tags (sample_id, tag) SELECT ${sampleId}, unnest(${tags}::text[]) ON CONFLICT DO NOTHING`;
  }
}
