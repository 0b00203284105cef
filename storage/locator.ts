/** Every object key the service writes is built here, so the layout has one definition. */
export const objectKeys = {
  samplePrefix: (organizationId: string, sampleId: string) => `orgs/${organizationId}/samples/${sampleId}/`,
  /** The uploaded file, named after the client's filename as far as a key can be (`fileKeySegment`). */
  originalUpload: (organizationId: string, sampleId: string, filename: string) =>
    `orgs/${organizationId}/samples/${sampleId}/original/${fileKeySegment(filename)}`,
  /** The de-identified copy, which is the sample's "original upload" once ingest has run. */
  deidentified: (organizationId: string, sampleId: string, filename: string) =>
    `orgs/${organizationId}/samples/${sampleId}/deidentified/${fileKeySegment(filename)}`,
  /** Root of the H&E OME-Zarr pyramid (a prefix: the store's keys follow it). */
  hePyramid: (organizationId: string, sampleId: string) => `orgs/${organizationId}/samples/${sampleId}/he/`,
  thumbnail: (organizationId: string, sampleId: string) =>
    `orgs/${organizationId}/samples/${sampleId}/thumbnail.jpg`,
  /** A prediction job's OME-Zarr store (a prefix), under its sample so that a purge removes it. */
  predictionStore: (organizationId: string, sampleId: string, jobId: string) =>
    `orgs/${organizationId}/samples/${sampleId}/jobs/${jobId}/`,
  /** A prediction job's band summaries (a prefix): what postprocessing merges into the store's metadata. */
  predictionBands: (organizationId: string, sampleId: string, jobId: string) =>
    `orgs/${organizationId}/samples/${sampleId}/prediction-bands/${jobId}/`,
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

/** A file's key segment is at most this long: with our longest prefix it stays far below S3's 1,024. */
const MAX_SEGMENT_BYTES = 255;
/** What replaces a character no key may hold (a control character, a lone surrogate). */
const REPLACEMENT = '_';
/** The segment of a filename that leaves nothing usable once cleaned (`.`, `..`). */
const FALLBACK_SEGMENT = 'upload';
/** The longest extension kept when a long name is shortened. */
const MAX_EXTENSION_BYTES = 32;

/**
 * The key segment a client's filename is stored under. The filename itself stays on the sample
 * as data; the key only needs to be valid on every backend. A name that is a valid segment is
 * used unchanged (so every layout stored so far keeps its keys); any other is cleaned: control
 * characters, lone surrogates and separators become `_`, `.` and `..` become `upload`, and a
 * name over 255 UTF-8 bytes is shortened at a character boundary, keeping its extension. Total:
 * never throws, and its answer always passes `resolveKey` under a prefix of ours.
 */
export function fileKeySegment(filename: string): string {
  const cleaned = filename.replace(/[\p{Cc}\p{Surrogate}/\\]/gu, REPLACEMENT);
  if (cleaned === '' || cleaned === '.' || cleaned === '..') return FALLBACK_SEGMENT;
  if (Buffer.byteLength(cleaned, 'utf8') <= MAX_SEGMENT_BYTES) return cleaned;
  const dot = cleaned.lastIndexOf('.');
  const extension =
    dot > 0 && Buffer.byteLength(cleaned.slice(dot), 'utf8') <= MAX_EXTENSION_BYTES ? cleaned.slice(dot) : '';
  const stem = truncateUtf8(
    cleaned.slice(0, cleaned.length - extension.length),
    MAX_SEGMENT_BYTES - Buffer.byteLength(extension, 'utf8'),
  );
  return `${stem}${extension}`;
}

/** The longest prefix of `text` (whole code points) of at most `maxBytes` UTF-8 bytes. */
function truncateUtf8(text: string, maxBytes: number): string {
  let bytes = 0;
  let end = 0;
  for (const char of text) {
    bytes += Buffer.byteLength(char, 'utf8');
    if (bytes > maxBytes) break;
    end += char.length;
  }
  return text.slice(0, end);
}
