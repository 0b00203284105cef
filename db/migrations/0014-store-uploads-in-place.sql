-- Uploads are stored in place (storage's InPlaceUploads) instead of as part objects joined into
-- a second copy after the last byte. A sample keeps the store's state between chunks, the one
-- request that may write its next chunk (and since when, so that a vanished writer's claim
-- lapses), and whether the SHA-256 of the bytes received is known.
ALTER TABLE samples
  ADD COLUMN upload_state text,
  ADD COLUMN upload_writer uuid,
  ADD COLUMN upload_writer_seen_at timestamptz,
  ADD COLUMN content_sha256_checked boolean NOT NULL DEFAULT false;

-- Parts joined before this change had their hash computed then.
UPDATE samples SET content_sha256_checked = true
  WHERE content_sha256 IS NOT NULL AND status NOT IN ('uploading', 'upload_failed');

-- An upload still stored as parts starts over from its first byte: a client asks where it
-- stands (`bytes */TOTAL`) and is told nothing is stored.
UPDATE samples SET uploaded_bytes = 0 WHERE status = 'uploading';

DROP TABLE upload_parts;
