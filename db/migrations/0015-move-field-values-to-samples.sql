-- Organization field values move onto the sample row: one jsonb object keyed by definition id
-- (text and select as strings, number as a number, date as 'YYYY-MM-DD', boolean, multi_select
-- as an array of strings). A list facet is then a predicate on the row the list reads anyway,
-- instead of an index probe into a second table for every candidate row, and the equality
-- facets (`@>`) can be served by one GIN index when they are the most selective predicate.
ALTER TABLE samples
  ADD COLUMN field_values jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(field_values) = 'object');
UPDATE samples s SET field_values = v.object
  FROM (
    SELECT sample_id, jsonb_object_agg(definition_id::text, coalesce(
      to_jsonb(value_text), to_jsonb(value_number), to_jsonb(to_char(value_date, 'YYYY-MM-DD')),
      to_jsonb(value_boolean), to_jsonb(value_options))) AS object
    FROM sample_field_values GROUP BY sample_id
  ) v
  WHERE v.sample_id = s.id;
DROP TABLE sample_field_values;
CREATE INDEX samples_field_values ON samples USING gin (field_values jsonb_path_ops);

-- `q` is always asked within one organization: a trigram index that starts with the
-- organization reads only that organization's matches, not every organization's.
CREATE EXTENSION IF NOT EXISTS btree_gin;
CREATE INDEX samples_org_search_text_trgm ON samples USING gin (organization_id, search_text gin_trgm_ops);
DROP INDEX samples_search_text_trgm;
