export {
  type BandSummary,
  mergeBandSummaries,
  type PredictBandOptions,
  predictBand,
  predictionBandCount,
} from './bands';
export type { ChannelStatistics } from './kernels';
export {
  closeModelSessions,
  inferBatch,
  inputTileLength,
  type ModelSession,
  type ModelSessionOptions,
  type ModelSpec,
  openModelSession,
} from './model';
export { nearestLevel, type PatchGrid, type PixelRect, type ShardAddress, TilePlan } from './plan';
export {
  type FinishPredictionOptions,
  finishPrediction,
  type PredictionProgress,
  type PredictMarkersOptions,
  type PredictMarkersResult,
  predictMarkers,
} from './predict';
export {
  channelWindow,
  type FinishPredictionStoreOptions,
  type FinishProgress,
  finishPredictionStore,
  PREDICTION_FILL_VALUE,
  type PredictionStoreLayout,
  readPredictionLayout,
} from './store';
