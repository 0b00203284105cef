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

export async function insertFieldDefinition(
  sql: Queryable,
  input: {
    organizationId: string;
    key: string;
    label: string;
    valueType: FieldDefinition['valueType'];
    options: string[];
  },
): Promise<FieldDefinition> {
  const [row] = await sql<FieldDefinition[]>`
    INSERT INTO sample_field_definitions (organization_id, key, label, value_type, origin, storage, writable, options)
    VALUES (${input.organizationId}, ${input.key}, ${input.label}, ${input.valueType}, 'organization', 'value_table', true,
      ${input.options})
    RETURNING ${sql.unsafe(definitionColumns)}`;
  return row!;
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

interface ValueRow {
  sampleId: string;
  key: string;
  valueText: string | null;
  valueNumber: number | null;
  valueDate: string | null;
  valueBoolean: boolean | null;
  valueOptions: string[] | null;
}

function rowValue(row: ValueRow): unknown {
  return row.valueText ?? row.valueNumber ?? row.valueDate ?? row.valueBoolean ?? row.valueOptions;
}

/**
 * The `fields` object of each sample, keyed by definition key, in three queries whatever the
 * number of samples: organization values, tags (sorted), and the public flag.
 */
export async function fieldValuesOf(
  sql: Queryable,
  sampleIds: string[],
): Promise<Map<string, Record<string, unknown>>> {
  const fields = new Map<string, Record<string, unknown>>(sampleIds.map((id) => [id, {}]));
  if (sampleIds.length === 0) return fields;
  const [values, tags, publicFlags] = await Promise.all([
    sql<ValueRow[]>`
      SELECT v.sample_id AS "sampleId", d.key, v.value_text AS "valueText", v.value_number AS "valueNumber",
        to_char(v.value_date, 'YYYY-MM-DD') AS "valueDate", v.value_boolean AS "valueBoolean", v.value_options AS "valueOptions"
      FROM sample_field_values v JOIN sample_field_definitions d ON d.id = v.definition_id
      WHERE v.sample_id = ANY(${sampleIds}::uuid[]) AND d.retired_at IS NULL`,
    sql<{ sampleId: string; tags: string[] }[]>`
      SELECT sample_id AS "sampleId", array_agg(tag ORDER BY tag) AS tags
      FROM sample_tags WHERE sample_id = ANY(${sampleIds}::uuid[]) GROUP BY sample_id`,
    sql<{ id: string; isPublic: boolean }[]>`
      SELECT id, public_id IS NOT NULL AS "isPublic" FROM samples WHERE id = ANY(${sampleIds}::uuid[])`,
  ]);
  for (const row of publicFlags) Object.assign(fields.get(row.id)!, { tags: [], public: row.isPublic });
  for (const row of tags) fields.get(row.sampleId)!.tags = row.tags;
  for (const row of values) fields.get(row.sampleId)![row.key] = rowValue(row);
  return fields;
}

/** Replaces one field's whole value; `null` clears it. */
export async function writeFieldValue(
  sql: Queryable,
  input: { sampleId: string; definitionId: string; value: StoredFieldValue | null },
): Promise<void> {
  const { sampleId, definitionId, value } = input;
  if (value === null) {
    await sql`DELETE FROM sample_field_values WHERE sample_id = ${sampleId} AND definition_id = ${definitionId}`;
    return;
  }
  const column = (kind: StoredFieldValue['kind']) => (value.kind === kind ? value.value : null);
  await sql`
    INSERT INTO sample_field_values (sample_id, definition_id, value_text, value_number, value_date, value_boolean, value_options)
    VALUES (${sampleId}, ${definitionId}, ${column('text') as string | null}, ${column('number') as number | null},
      ${column('date') as string | null}::date, ${column('boolean') as boolean | null}, ${column('options') as string[] | null})
    ON CONFLICT (sample_id, definition_id) DO UPDATE SET
      value_text = EXCLUDED.value_text, value_number = EXCLUDED.value_number, value_date = EXCLUDED.value_date,
      value_boolean = EXCLUDED.value_boolean, value_options = EXCLUDED.value_options`;
}

/** Replaces the complete tag set. */
export async function replaceTags(sql: Queryable, sampleId: string, tags: string[]): Promise<void> {
  await sql`DELETE FROM sample_tags WHERE sample_id = ${sampleId} AND NOT (tag = ANY(${tags}::text[]))`;
  if (tags.length > 0) {
    await sql`INSERT INTO sample_tags (sample_id, tag) SELECT ${sampleId}, unnest(${tags}::text[]) ON CONFLICT DO NOTHING`;
  }
}
