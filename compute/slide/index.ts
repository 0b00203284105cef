export {
  type AperioDescription,
  formatAperioDescription,
  isAperioDescription,
  parseAperioDescription,
} from './aperio';
export { effectiveMppOf, type Mpp, mppOf, omeLengthToMicrons, resolutionToMpp } from './calibration';
export { isOmeXml } from './ome';
export {
  type AssociatedKind,
  detectVendor,
  probeSlide,
  probeTiff,
  type SlideLayout,
  type SlideLevel,
  type SlideProbe,
  type SlideVendor,
  slideLayout,
} from './probe';
export { openTiffSlide, type TiffSlide, type TiffSlideOptions } from './tiff-image';
