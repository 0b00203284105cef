export {
  cachingSink,
  fromLevelOfSize,
  heTiffImage,
  labelTiffImage,
  type NgffImageOptions,
  type PredictionImageOptions,
  predictionTiffImage,
} from './ngff-tiff';
export {
  DEFAULT_JPEG_QUALITY,
  type OmeTiffImage,
  type OmeTiffLevel,
  type OmeTiffProgress,
  type OmeTiffResult,
  type TiffCompression,
  type WriteOmeTiffOptions,
  writeOmeTiff,
} from './ome-tiff';
export { type OmePixelType, type OmeXmlChannel, omeColor } from './ome-xml';
export {
  ARCHIVE_HE_PATH,
  ARCHIVE_LABELS_PATH,
  type ArchiveDocument,
  type ArchiveSource,
  type PredictionArchiveSources,
  planPredictionArchive,
  planZarrArchive,
} from './zarr-archive';
export {
  type WriteZarrZipOptions,
  writeZarrZip,
  type ZarrZipProgress,
  type ZarrZipResult,
  type ZipEntrySource,
} from './zarr-zip';
