-- Cell segmentation: one row per run of `segmentation-{sampleId}-{attempt}`, each making one
-- layer. The run id shares the `/jobs/{id}` id space with prediction jobs (it is never a jobs row:
-- segmentation is credit-free and owned by its own lifecycle).

CREATE TABLE segmentation_runs (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  sample_id uuid NOT NULL REFERENCES samples (id) ON DELETE CASCADE,
  -- n of `segmentation-{sampleId}-{n}`: 1 for the first run of a sample, +1 per retry.
  attempt integer NOT NULL CHECK (attempt > 0),
  status text NOT NULL DEFAULT 'queued' CHECK (status IN (
    'queued', 'running', 'postprocessing', 'completed', 'failed', 'cancelled')),
  progress double precision CHECK (progress BETWEEN 0 AND 1),
  layer_id uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
  -- instance_id = layer_number * 2^32 + local_label: unique across layers, a plain uint64.
  layer_number bigserial NOT NULL UNIQUE,
  -- Key prefix (ending in '/') of the layer: mask/, features/, provenance.json.
  layer_prefix text CHECK (layer_prefix LIKE '%/'),
  segmenter text,
  instance_count integer CHECK (instance_count >= 0),
  -- The prediction job whose markers the marker tables summarise, and those markers.
  marker_job_id uuid,
  markers text[] NOT NULL DEFAULT '{}',
  error_message text,
  workflow_started_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  started_at timestamptz,
  completed_at timestamptz,
  UNIQUE (sample_id, attempt),
  CONSTRAINT segmentation_runs_completed_has_layer CHECK (
    status <> 'completed' OR (layer_prefix IS NOT NULL AND instance_count IS NOT NULL))
);

-- At most one active run per sample: two racing starts cannot both insert one.
CREATE UNIQUE INDEX segmentation_runs_one_active ON segmentation_runs (sample_id)
  WHERE status IN ('queued', 'running', 'postprocessing');
-- The reconciler's scan: queued runs whose workflow start was never recorded.
CREATE INDEX segmentation_runs_unstarted ON segmentation_runs (created_at)
  WHERE status = 'queued' AND workflow_started_at IS NULL;
