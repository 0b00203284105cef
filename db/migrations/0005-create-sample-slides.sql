-- What ingest learned about a sample's slide and where it put the derived objects. One row
-- per sample, written step by step by the ingest activities; the API reads only
-- samples.width_px/height_px/mpp_calibrated, which ingest copies there.
CREATE TABLE sample_slides (
  sample_id uuid PRIMARY KEY REFERENCES samples (id) ON DELETE CASCADE,
  format text NOT NULL CHECK (format IN ('tiff', 'dicom')),
  vendor text NOT NULL,
  -- Largest first: [{widthPx, heightPx, downsample}] as the file holds them.
  levels jsonb NOT NULL,
  -- Calibration as recorded, per axis (null: none usable); samples.mpp_calibrated is the
  -- effective isotropic value.
  mpp_x double precision,
  mpp_y double precision,
  metadata jsonb NOT NULL DEFAULT '{}',
  -- The OME-Zarr H&E pyramid (a key prefix ending in '/'), set once it is complete.
  he_prefix text,
  he_levels jsonb,
  thumbnail_key text,
  -- Tissue mask: a PNG and a Zarr array, with level-0 pixels per mask pixel on each axis.
  tissue_mask_png_key text,
  tissue_mask_zarr_prefix text,
  tissue_mask_width integer,
  tissue_mask_height integer,
  tissue_mask_downsample_x double precision,
  tissue_mask_downsample_y double precision,
  tissue_fraction double precision,
  -- Model-grid positions with enough tissue, for the effective mpp it was counted at.
  patch_count integer CHECK (patch_count >= 0),
  patch_count_mpp double precision,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- The resolved decision is stored with the upload (per-upload override, else organization
-- default, else true), so a later change of the organization default does not rewrite it.
UPDATE samples s SET auto_segment = coalesce(s.auto_segment, o.auto_segment_default, true)
  FROM organizations o WHERE o.id = s.organization_id AND s.auto_segment IS NULL;

-- A zero-byte upload is accepted and completed by the protocol's `bytes */0`, so that ingest
-- can refuse it with a reason on the sample (deid_failed) like any other unreadable file.
ALTER TABLE samples DROP CONSTRAINT samples_file_size_check;
ALTER TABLE samples ADD CONSTRAINT samples_file_size_check CHECK (file_size >= 0);
