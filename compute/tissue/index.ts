export {
  detectTissue,
  type FeatureThreshold,
  type ThresholdSource,
  type TissueDetection,
  type TissueMask,
  type TissueOptions,
} from './detect';
export {
  countTissuePatches,
  type MaskScale,
  type PatchGridInput,
  type TissuePatches,
  tissuePatchGrid,
  tissuePatchPositions,
} from './patches';
export { encodeMaskPng } from './png';
