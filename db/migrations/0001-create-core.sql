-- Core tenancy, credentials, samples (= uploads), jobs, the credit ledger and job events.
-- CHECK lists mirror the enumerations of schemas/enums.ts.

CREATE TABLE organizations (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  default_expiration_days integer CHECK (default_expiration_days > 0),
  auto_segment_default boolean,
  active_job_cap integer NOT NULL DEFAULT 10 CHECK (active_job_cap > 0),
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  email text NOT NULL UNIQUE CHECK (email = lower(email) AND position('@' IN email) > 1),
  display_name text,
  platform_admin boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE memberships (
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  role text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, user_id)
);

-- Only a SHA-256 of the secret is stored; the key itself is shown once at creation.
CREATE TABLE api_keys (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name text NOT NULL,
  prefix text NOT NULL,
  secret_sha256 bytea NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);

-- An upload and a sample are one record (DECISIONS.md).
CREATE TABLE samples (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  created_by uuid REFERENCES users (id) ON DELETE SET NULL,
  filename text NOT NULL,
  name text,
  content_type text NOT NULL,
  file_size bigint NOT NULL CHECK (file_size > 0),
  content_sha256 text CHECK (content_sha256 ~ '^[0-9a-f]{64}$'),
  status text NOT NULL DEFAULT 'uploading' CHECK (status IN (
    'uploading', 'upload_failed', 'deid_running', 'deid_failed', 'preprocessing', 'ready', 'preprocess_failed')),
  status_message text,
  uploaded_bytes bigint NOT NULL DEFAULT 0 CHECK (uploaded_bytes >= 0 AND uploaded_bytes <= file_size),
  storage_key text NOT NULL,
  auto_segment boolean,
  mpp_override double precision CHECK (mpp_override > 0 AND mpp_override <= 100),
  mpp_calibrated double precision,
  width_px integer,
  height_px integer,
  ingest_started_at timestamptz,
  expires_at timestamptz,
  expires_at_source text CHECK (expires_at_source IN ('org_default', 'custom')),
  trashed_at timestamptz,
  archived_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX samples_org_newest ON samples (organization_id, created_at DESC, id DESC);
CREATE INDEX samples_org_sha256 ON samples (organization_id, content_sha256)
  WHERE content_sha256 IS NOT NULL AND status <> 'upload_failed';

-- Each stored chunk of a resumable upload; assembled in order once the last byte lands.
CREATE TABLE upload_parts (
  sample_id uuid NOT NULL REFERENCES samples (id) ON DELETE CASCADE,
  start_offset bigint NOT NULL CHECK (start_offset >= 0),
  end_offset bigint NOT NULL CHECK (end_offset > start_offset),
  storage_key text NOT NULL,
  PRIMARY KEY (sample_id, start_offset)
);

CREATE TABLE jobs (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  sample_id uuid NOT NULL REFERENCES samples (id) ON DELETE CASCADE,
  status text NOT NULL DEFAULT 'queued' CHECK (status IN (
    'queued', 'dispatching', 'preprocessing', 'running', 'postprocessing',
    'completed', 'partial_failed', 'failed', 'cancelled')),
  progress double precision CHECK (progress BETWEEN 0 AND 1),
  created_at timestamptz NOT NULL DEFAULT now(),
  started_at timestamptz,
  completed_at timestamptz
);
CREATE INDEX jobs_sample_newest ON jobs (sample_id, created_at DESC);

-- Append-only: balance = sum(balance_delta), pending = sum(pending_delta).
-- grant: balance +n; reserve: pending +n; spend: balance -n, pending -n; release: pending -n.
CREATE TABLE credit_ledger (
  id bigserial PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  job_id uuid REFERENCES jobs (id) ON DELETE SET NULL,
  kind text NOT NULL CHECK (kind IN ('grant', 'reserve', 'spend', 'release')),
  balance_delta bigint NOT NULL,
  pending_delta bigint NOT NULL,
  note text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX credit_ledger_org ON credit_ledger (organization_id);

CREATE FUNCTION credit_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'credit_ledger is append-only' USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER credit_ledger_no_update BEFORE UPDATE OR DELETE ON credit_ledger
  FOR EACH ROW EXECUTE FUNCTION credit_ledger_append_only();
CREATE TRIGGER credit_ledger_no_truncate BEFORE TRUNCATE ON credit_ledger
  FOR EACH STATEMENT EXECUTE FUNCTION credit_ledger_append_only();

-- Every status or progress change of a job; seq is the SSE event id.
CREATE TABLE job_events (
  id bigserial PRIMARY KEY,
  job_id uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  seq integer NOT NULL CHECK (seq > 0),
  status text NOT NULL,
  progress double precision,
  result_storage_path text,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (job_id, seq)
);

CREATE FUNCTION job_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('job_events', json_build_object('jobId', NEW.job_id, 'seq', NEW.seq)::text);
  RETURN NEW;
END $$;
CREATE TRIGGER job_events_notify AFTER INSERT ON job_events
  FOR EACH ROW EXECUTE FUNCTION job_events_notify();

-- Token buckets of the per-credential rate limit, shared by every API replica.
CREATE TABLE rate_limit_buckets (
  key text PRIMARY KEY,
  tokens double precision NOT NULL,
  updated_at timestamptz NOT NULL
);

-- Takes one token from a bucket under a row lock; returns whether the request may pass and
-- the tokens left (fractional), from which the caller derives Retry-After.
CREATE FUNCTION take_rate_token(bucket_key text, rate float8, burst float8, OUT allowed boolean, OUT tokens float8)
LANGUAGE plpgsql AS $$
DECLARE
  now_ts timestamptz := clock_timestamp();
BEGIN
  INSERT INTO rate_limit_buckets (key, tokens, updated_at) VALUES (bucket_key, burst, now_ts)
    ON CONFLICT (key) DO NOTHING;
  SELECT least(burst, b.tokens + extract(epoch FROM now_ts - b.updated_at) * rate) INTO tokens
    FROM rate_limit_buckets b WHERE b.key = bucket_key FOR UPDATE;
  allowed := tokens >= 1;
  IF allowed THEN
    tokens := tokens - 1;
  END IF;
  UPDATE rate_limit_buckets SET tokens = take_rate_token.tokens, updated_at = now_ts WHERE key = bucket_key;
END $$;
