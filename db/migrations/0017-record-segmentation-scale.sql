-- The scale (microns per pixel) a segmentation run segments at, its sample's when the run was
-- queued: nuclei are found, and areas measured, in microns. A completed run at another scale
-- than its sample's now is not reused (a change of mpp queues a new run). Runs queued before
-- this column have none and are reused as before.
ALTER TABLE segmentation_runs ADD COLUMN mpp double precision CHECK (mpp > 0);
