-- An upload's session URL expires (UPLOAD_SESSION_TTL_SECONDS after the upload was created);
-- the sample keeps that moment so that the sweep of abandoned uploads fails exactly the
-- uploads no client can finish any more, whatever the setting is when the sweep runs.
ALTER TABLE samples ADD COLUMN upload_expires_at timestamptz;

-- Uploads under way before this column: their URLs were signed for the default 7 days.
UPDATE samples SET upload_expires_at = created_at + interval '7 days' WHERE status = 'uploading';

-- The sweep reads the few uploads still under way, and the failed ones still holding bytes.
CREATE INDEX samples_uploading_expiry ON samples (upload_expires_at) WHERE status = 'uploading';
CREATE INDEX samples_failed_upload_bytes ON samples (id)
  WHERE status = 'upload_failed' AND upload_state IS NOT NULL;
