-- Sample fields, tags, expiration audit, and the job columns the sample detail shows.

CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- System definitions (tags, public) have no organization and fixed ids; organizations add
-- their own. `retired_at` hides a definition without losing its values.
CREATE TABLE sample_field_definitions (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid REFERENCES organizations (id) ON DELETE CASCADE,
  key text NOT NULL CHECK (key ~ '^[a-z][a-z0-9_]{0,62}$'),
  label text NOT NULL CHECK (length(label) BETWEEN 1 AND 200),
  value_type text NOT NULL CHECK (value_type IN ('text', 'number', 'date', 'boolean', 'select', 'multi_select', 'tags')),
  origin text NOT NULL CHECK (origin IN ('system', 'organization')),
  storage text NOT NULL CHECK (storage IN ('value_table', 'tag_table', 'column')),
  writable boolean NOT NULL,
  options text[] NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  retired_at timestamptz,
  CHECK ((origin = 'system') = (organization_id IS NULL))
);
CREATE UNIQUE INDEX sample_field_definitions_org_key ON sample_field_definitions (organization_id, key) WHERE retired_at IS NULL;
CREATE UNIQUE INDEX sample_field_definitions_system_key ON sample_field_definitions (key) WHERE organization_id IS NULL;

INSERT INTO sample_field_definitions (id, organization_id, key, label, value_type, origin, storage, writable) VALUES
  ('00000000-0000-4000-8000-000000000001', NULL, 'tags', 'Tags', 'tags', 'system', 'tag_table', true),
  ('00000000-0000-4000-8000-000000000002', NULL, 'public', 'Public', 'boolean', 'system', 'column', false);

-- One row per sample and field; the column used follows the definition's value type.
CREATE TABLE sample_field_values (
  sample_id uuid NOT NULL REFERENCES samples (id) ON DELETE CASCADE,
  definition_id uuid NOT NULL REFERENCES sample_field_definitions (id) ON DELETE CASCADE,
  value_text text,
  value_number double precision,
  value_date date,
  value_boolean boolean,
  value_options text[],
  PRIMARY KEY (sample_id, definition_id)
);
CREATE INDEX sample_field_values_text ON sample_field_values (definition_id, value_text) WHERE value_text IS NOT NULL;
CREATE INDEX sample_field_values_text_trgm ON sample_field_values USING gin (value_text gin_trgm_ops);
CREATE INDEX sample_field_values_number ON sample_field_values (definition_id, value_number) WHERE value_number IS NOT NULL;
CREATE INDEX sample_field_values_date ON sample_field_values (definition_id, value_date) WHERE value_date IS NOT NULL;
CREATE INDEX sample_field_values_boolean ON sample_field_values (definition_id, value_boolean) WHERE value_boolean IS NOT NULL;
CREATE INDEX sample_field_values_options ON sample_field_values USING gin (value_options);

CREATE TABLE sample_tags (
  sample_id uuid NOT NULL REFERENCES samples (id) ON DELETE CASCADE,
  tag text NOT NULL CHECK (length(tag) BETWEEN 1 AND 50 AND tag = lower(tag) AND position(',' IN tag) = 0),
  PRIMARY KEY (sample_id, tag)
);
CREATE INDEX sample_tags_tag ON sample_tags (tag);

ALTER TABLE samples
  ADD COLUMN public_id uuid UNIQUE,
  ADD COLUMN expiration_changed_at timestamptz,
  ADD COLUMN expiration_changed_by uuid REFERENCES users (id) ON DELETE SET NULL,
  ADD COLUMN purge_started_at timestamptz;
CREATE INDEX samples_name_trgm ON samples USING gin (name gin_trgm_ops);
CREATE INDEX samples_filename_trgm ON samples USING gin (filename gin_trgm_ops);
CREATE INDEX samples_org_status ON samples (organization_id, status, created_at DESC);
CREATE INDEX samples_expiring ON samples (expires_at) WHERE trashed_at IS NULL AND expires_at IS NOT NULL;
CREATE INDEX samples_trashed ON samples (trashed_at) WHERE trashed_at IS NOT NULL;

-- Who changed a sample's expiration, when, from what to what, and in which batch.
CREATE TABLE sample_expiration_audit (
  id bigserial PRIMARY KEY,
  batch_id uuid NOT NULL,
  sample_id uuid NOT NULL REFERENCES samples (id) ON DELETE CASCADE,
  changed_by uuid REFERENCES users (id) ON DELETE SET NULL,
  changed_at timestamptz NOT NULL DEFAULT now(),
  previous_expires_at timestamptz,
  previous_source text,
  new_expires_at timestamptz,
  new_source text,
  reason text
);
CREATE INDEX sample_expiration_audit_sample ON sample_expiration_audit (sample_id, changed_at DESC);

ALTER TABLE jobs
  ADD COLUMN model text,
  ADD COLUMN markers text[] NOT NULL DEFAULT '{}',
  ADD COLUMN reserved_credits bigint,
  ADD COLUMN error_message text,
  ADD COLUMN results_available boolean NOT NULL DEFAULT false;
CREATE INDEX jobs_markers ON jobs USING gin (markers);
CREATE INDEX jobs_sample_status ON jobs (sample_id, status);

-- NULL: the full marker panel of the model registry; else the names the organization may request.
ALTER TABLE organizations ADD COLUMN marker_entitlement text[];
