export {
  type BuildHePyramidOptions,
  type BuildHePyramidRegionOptions,
  buildHePyramid,
  buildHePyramidRegion,
  HE_FILL_VALUE,
  type HePyramid,
  type PyramidProgress,
  type PyramidResume,
  planHePyramid,
  rescaleHePyramidGroup,
  writeHePyramidArrays,
  writeHePyramidGroup,
} from './build';
export { type PyramidLevel, type PyramidRegion, type PyramidStage, pyramidLevels } from './plan';
export { openHePyramid, readPyramidLevel } from './read';
