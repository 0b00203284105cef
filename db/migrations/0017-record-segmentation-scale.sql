-- The scale (microns per pixel) a segmentation run segments at, its sample's when the run was
-- queued: nuclei are found, and areas measured, in microns. A completed run at another scale
-- than its sample's now is not reused (a change of mpp queues a new run). Runs queued before
-- this column are taken to have been made at their sample's scale now, the best guess there is.
ALTER TABLE segmentation_runs ADD COLUMN mpp double precision CHECK (mpp > 0);
UPDATE segmentation_runs AS run SET mpp = coalesce(sample.mpp_override, sample.mpp_calibrated)
FROM samples AS sample WHERE sample.id = run.sample_id;
