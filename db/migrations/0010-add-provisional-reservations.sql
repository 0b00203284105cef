-- A job submitted before its sample is ready reserves an upper bound: every model-grid position
-- of the whole slide. Once the tissue mask exists the reservation drops to the exact price, and
-- the difference returns to the available credits as one `reprice` row (pending -n).
ALTER TABLE jobs ADD COLUMN price_provisional boolean NOT NULL DEFAULT false;

ALTER TABLE credit_ledger DROP CONSTRAINT credit_ledger_kind_check;
ALTER TABLE credit_ledger ADD CONSTRAINT credit_ledger_kind_check
  CHECK (kind IN ('grant', 'reserve', 'spend', 'release', 'reprice'));
CREATE UNIQUE INDEX credit_ledger_job_reprice ON credit_ledger (job_id) WHERE kind = 'reprice';
