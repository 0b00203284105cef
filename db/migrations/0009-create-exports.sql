-- Result exports: one row per (job, format, selection), reused by identical requests, retried
-- in place when it failed, removed with its artifact once it expires (the retention sweep).
-- job_id names a prediction job or a segmentation run (one id space), hence no foreign key.

CREATE TABLE exports (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  sample_id uuid NOT NULL REFERENCES samples (id) ON DELETE CASCADE,
  job_id uuid NOT NULL,
  format text NOT NULL CHECK (format IN ('ome-zarr', 'ome-zarr-zip', 'ome-tiff')),
  include_he boolean NOT NULL,
  include_segmentation boolean NOT NULL,
  include_original_upload boolean NOT NULL,
  -- The segmentation layer the export holds, fixed when it was requested.
  layer_id uuid,
  -- n of the workflow run: a retry of a failed export is a new run of the same workflow id.
  attempt integer NOT NULL DEFAULT 1 CHECK (attempt > 0),
  status text NOT NULL CHECK (status IN ('pending', 'running', 'ready', 'failed')),
  error text,
  -- The converted file (zip or TIFF), set when it is published.
  artifact_key text,
  artifact_size bigint CHECK (artifact_size >= 0),
  workflow_started_at timestamptz,
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (job_id, format, include_he, include_segmentation, include_original_upload),
  CONSTRAINT exports_ready_has_artifact CHECK (
    status <> 'ready' OR format = 'ome-zarr' OR artifact_key IS NOT NULL)
);

CREATE INDEX exports_expiring ON exports (expires_at);
