export {
  type BuildHePyramidOptions,
  buildHePyramid,
  HE_FILL_VALUE,
  type HePyramid,
  type PyramidProgress,
  type PyramidResume,
} from './build';
export { type PyramidLevel, pyramidLevels } from './plan';
export { openHePyramid, readPyramidLevel } from './read';
