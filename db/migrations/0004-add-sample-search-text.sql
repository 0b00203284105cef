-- `q` searches display name and filename through one lowercased column and one trigram
-- index: ILIKE over two indexes made the planner fall back to a sequential scan at 100,000
-- samples (bench/sample-list). The newline keeps a match from spanning both parts, because
-- `q` may not contain control characters.
ALTER TABLE samples
  ADD COLUMN search_text text GENERATED ALWAYS AS (lower(coalesce(name, '') || E'\n' || filename)) STORED;
CREATE INDEX samples_search_text_trgm ON samples USING gin (search_text gin_trgm_ops);
DROP INDEX samples_name_trgm;
DROP INDEX samples_filename_trgm;
