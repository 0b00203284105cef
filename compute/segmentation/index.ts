export {
  type CellOutlinesResult,
  GEOPARQUET_VERSION,
  OUTLINE_COLUMNS,
  type WriteCellOutlinesOptions,
  writeCellOutlines,
} from './cell-files';
export {
  type ClassicalOptions,
  createClassicalSegmenter,
  defaultClassicalOptions,
  estimateSlideStain,
  type SlideStain,
  segmentClassical,
} from './classical';
export { closeClassicalThreads } from './classical-threads';
export { distanceToBackground, squaredDistanceToSites } from './distance';
export { expandLabels } from './expand';
export {
  convexHullArea,
  inertiaShape,
  M as MEASUREMENT_INDEX,
  MEASUREMENT_COUNT,
  MEASUREMENTS,
  type Measurement,
  measureCell,
  type PlacedDensities,
} from './features';
export { predictionMarkerReader } from './marker-reader';
export { LABEL_ZSTD_LEVEL, type LabelMaskProgress, type WriteLabelMaskOptions, writeLabelMask } from './mask';
export { defaultInstanceOptions, type InstanceOptions, nucleusInstances } from './nuclei';
export {
  DUPLICATE_OVERLAP,
  decodeTileObjects,
  dropDuplicateObjects,
  EarlierTileObjects,
  earlierNeighbours,
  encodeTileObjects,
  labelOffsets,
  objectCentroid,
  objectsBounds,
  type SegmentTileOptions,
  segmentTileObjects,
  segmentWindowObjects,
  type TileObjects,
} from './objects';
export { createOnnxSegmenter, type OnnxSegmenterOptions } from './onnx';
export {
  type LabelWindow,
  type OutlinePolygon,
  type PixelBox,
  SIMPLIFY_TOLERANCE_PX,
  traceLabel,
} from './outlines';
export { type SegmentationQuality, segmentationQuality } from './quality';
export { EOSIN_OD, glassPixels, HEMATOXYLIN_OD, type StainDensities, stainDensities } from './stain';
export {
  EXPRESSION_COLUMNS,
  GEOMETRY_COLUMNS,
  INSTANCE_COLUMNS,
  MARKER_COLUMNS,
  MORPHOLOGY_COLUMNS,
  type PixelRect,
  ROW_GROUP_ROWS,
  type TableResult,
  type TableSource,
  type WriteInstanceTableOptions,
  type WriteMarkerTablesOptions,
  writeInstanceTable,
  writeMarkerTables,
} from './tables';
export {
  DEFAULT_HALO_UM,
  grownRect,
  haloPixels,
  type PlanSegmentationTilesOptions,
  planSegmentationTiles,
  type SegmentationTile,
  type SlideSize,
  type TissueMaskScale,
} from './tiles';
export type { LabelImage, Segmenter, TileSegmentation } from './types';
export { seededWatershed, type WatershedInput } from './watershed';
