/**
 * The pixel contract between slide readers, the pyramid builder and the tissue detector.
 * Every reader (TIFF family, DICOM) exposes a slide as a `SlideImage`; everything downstream
 * sees only `RgbImage` regions, so no step needs to know the file format.
 */

/** Interleaved 8-bit RGB, row-major: `data.length === width * height * 3`. */
export interface RgbImage {
  data: Uint8Array;
  width: number;
  height: number;
}

export interface ImageLevel {
  widthPx: number;
  heightPx: number;
  /** Level-0 size over this level's size, averaged over both axes. */
  downsample: number;
}

/** A rectangle at one level, in that level's pixels. */
export interface Region {
  level: number;
  x: number;
  y: number;
  width: number;
  height: number;
}

/** A whole-slide image read region by region; never a whole level at once. */
export interface SlideImage {
  readonly widthPx: number;
  readonly heightPx: number;
  /** Largest first; `levels[0]` is level 0. */
  readonly levels: readonly ImageLevel[];
  /**
   * The pixels of `region`, which must lie inside its level (RangeError otherwise). Sparse or
   * missing tiles read as white, the background of a brightfield slide.
   */
  readRegion(region: Region, signal?: AbortSignal): Promise<RgbImage>;
}
