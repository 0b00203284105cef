-- Prediction jobs: what a submission fixes (price, grid scale), what the workflow reports
-- (result store), and the markers of the durable lifecycle (workflow start, cancel, settlement).

ALTER TABLE jobs
  ADD COLUMN created_by uuid REFERENCES users (id) ON DELETE SET NULL,
  -- The price of the job: tissue patches at `mpp` times markers; reserved_credits is their product.
  ADD COLUMN patch_count integer CHECK (patch_count >= 0),
  ADD COLUMN marker_count integer CHECK (marker_count > 0),
  -- The effective mpp the patch count was taken at: the workflow tiles the same grid.
  ADD COLUMN mpp double precision CHECK (mpp > 0),
  -- Key prefix (ending in '/') of the job's OME-Zarr store, set by the workflow.
  ADD COLUMN result_prefix text CHECK (result_prefix LIKE '%/'),
  -- When `prediction-{id}` was started; NULL rows older than a few seconds are started by the reconciler.
  ADD COLUMN workflow_started_at timestamptz,
  ADD COLUMN cancel_requested_at timestamptz,
  -- Set in the transaction that writes the settlement rows of the ledger: exactly once per job.
  ADD COLUMN settled_at timestamptz,
  ADD CONSTRAINT jobs_results_need_prefix CHECK (NOT results_available OR result_prefix IS NOT NULL);

-- The organization's active-job cap counts these rows at every submission.
CREATE INDEX jobs_org_active ON jobs (organization_id)
  WHERE status IN ('queued', 'dispatching', 'preprocessing', 'running', 'postprocessing');
-- The reconciler's scan: queued jobs whose workflow start was never recorded.
CREATE INDEX jobs_unstarted ON jobs (created_at) WHERE status = 'queued' AND workflow_started_at IS NULL;

-- The ledger is append-only, so no cascade may rewrite it: `ON DELETE SET NULL` from jobs is an
-- UPDATE that the append-only trigger refuses, which made deleting (purging) a sample with jobs
-- fail. The job id stays in the ledger as history, without a foreign key.
ALTER TABLE credit_ledger DROP CONSTRAINT credit_ledger_job_id_fkey;
-- At most one reservation and one settlement row of each kind per job.
CREATE UNIQUE INDEX credit_ledger_job_kind ON credit_ledger (job_id, kind)
  WHERE job_id IS NOT NULL AND kind IN ('reserve', 'spend', 'release');
