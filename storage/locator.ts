/** Every object key the service writes is built here, so the layout has one definition. */
export const objectKeys = {
  samplePrefix: (organizationId: string, sampleId: string) => `orgs/${organizationId}/samples/${sampleId}/`,
  uploadPart: (organizationId: string, sampleId: string, startOffset: number, nonce: string) =>
    `orgs/${organizationId}/samples/${sampleId}/upload-parts/${String(startOffset).padStart(16, '0')}-${nonce}`,
  originalUpload: (organizationId: string, sampleId: string, filename: string) =>
    `orgs/${organizationId}/samples/${sampleId}/original/${filename}`,
  /** The de-identified copy, which is the sample's "original upload" once ingest has run. */
  deidentified: (organizationId: string, sampleId: string, filename: string) =>
    `orgs/${organizationId}/samples/${sampleId}/deidentified/${filename}`,
  /** Root of the H&E OME-Zarr pyramid (a prefix: the store's keys follow it). */
  hePyramid: (organizationId: string, sampleId: string) => `orgs/${organizationId}/samples/${sampleId}/he/`,
  thumbnail: (organizationId: string, sampleId: string) =>
    `orgs/${organizationId}/samples/${sampleId}/thumbnail.jpg`,
  /** A prediction job's OME-Zarr store (a prefix), under its sample so that a purge removes it. */
  predictionStore: (organizationId: string, sampleId: string, jobId: string) =>
    `orgs/${organizationId}/samples/${sampleId}/jobs/${jobId}/`,
  /** A segmentation layer (a prefix): `segmentationLayerFiles` names what lies under it. */
  segmentationLayer: (organizationId: string, sampleId: string, layerId: string) =>
    `orgs/${organizationId}/samples/${sampleId}/segmentation/${layerId}/`,
  /** The converted file of one attempt of an export (a new attempt never overwrites a served one). */
  exportArtifact: (
    organizationId: string,
    sampleId: string,
    exportId: string,
    attempt: number,
    filename: string,
  ) => `orgs/${organizationId}/samples/${sampleId}/exports/${exportId}/${attempt}/${filename}`,
  /** Everything an export made, for the sweep. */
  exportPrefix: (organizationId: string, sampleId: string, exportId: string) =>
    `orgs/${organizationId}/samples/${sampleId}/exports/${exportId}/`,
  /** Everything tissue detection writes: `mask.png` and the `mask.zarr/` array. */
  tissue: (organizationId: string, sampleId: string) => `orgs/${organizationId}/samples/${sampleId}/tissue/`,
} as const;

/** The files of a segmentation layer, relative to its prefix. */
export const segmentationLayerFiles = {
  /** The uint32 OME-NGFF label image (a store prefix). */
  mask: 'mask/',
  instances: 'features/instances.parquet',
  /** The cell outlines: QuPath's GeoJSON import, and GeoParquet beside the instance table. */
  cellsGeojson: 'features/cells.geojson',
  outlines: 'features/outlines.parquet',
  /** Prefix of `{marker}.parquet` in the API; stored per generation (`markerTableKey`). */
  markers: 'features/markers/',
  /** The tables as one AnnData file, rewritten with each generation of marker tables. */
  anndata: 'features/cells.h5ad',
  provenance: 'provenance.json',
  /** The manifest with artifact paths relative to the layer; the API makes them URLs. */
  manifest: 'manifest.json',
  /** Per-tile cell records: the working set the mask and tables are made from (never served). */
  objects: 'objects/',
} as const;

/** Where a marker table of one generation (the prediction job it summarises) lies in a layer. */
export function markerTableKey(predictionJobId: string, file: string): string {
  return `${segmentationLayerFiles.markers}${predictionJobId}/${file}`;
}
