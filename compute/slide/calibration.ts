import { ResolutionUnit } from '../tiff';

export interface Mpp {
  x: number;
  y: number;
}

/** Microscope scales live far inside these bounds; a value outside is a placeholder or a bug. */
const plausible = { min: 0.01, max: 100 };

/** Axes closer than this (relative) are one scale; farther apart, the pixels are not square. */
const isotropyTolerance = 0.01;

const micronsPerUnit = { [ResolutionUnit.Inch]: 25_400, [ResolutionUnit.Centimeter]: 10_000 } as const;

/**
 * Resolutions that writers put in when they know nothing: 1 px/unit, screen dpi, and the
 * 10 px/cm of some converters. The bounds below catch them too; the list names them on purpose.
 */
const placeholders: Record<number, readonly number[]> = {
  [ResolutionUnit.Inch]: [1, 72, 96],
  [ResolutionUnit.Centimeter]: [1, 10],
};

function isPlausible(mpp: number): boolean {
  return Number.isFinite(mpp) && mpp >= plausible.min && mpp <= plausible.max;
}

/** µm per pixel from one TIFF resolution value (pixels per unit), or null when it is no scale. */
export function resolutionToMpp(pixelsPerUnit: number | undefined, unit: number): number | null {
  if (pixelsPerUnit === undefined || !(unit === ResolutionUnit.Inch || unit === ResolutionUnit.Centimeter)) {
    return null;
  }
  if (placeholders[unit]?.includes(pixelsPerUnit)) return null;
  const mpp = micronsPerUnit[unit] / pixelsPerUnit;
  return isPlausible(mpp) ? mpp : null;
}

/** Both axes or nothing: a scale known along one axis only cannot place a tile grid. */
export function mppOf(x: number | null, y: number | null): Mpp | null {
  if (x === null || y === null || !isPlausible(x) || !isPlausible(y)) return null;
  return { x, y };
}

/** The one number the pipeline scales by; null for anisotropic pixels (recorded, not guessed). */
export function effectiveMppOf(mpp: Mpp | null): number | null {
  if (mpp === null) return null;
  const spread = Math.abs(mpp.x - mpp.y) / Math.max(mpp.x, mpp.y);
  return spread <= isotropyTolerance ? (mpp.x + mpp.y) / 2 : null;
}

/** Micrometres per OME `UnitsLength` symbol; `pixel` and `reference frame` are not lengths. */
const omeUnits: Record<string, number> = {
  km: 1e9,
  hm: 1e8,
  dam: 1e7,
  m: 1e6,
  dm: 1e5,
  cm: 1e4,
  mm: 1e3,
  µm: 1,
  μm: 1,
  um: 1,
  nm: 1e-3,
  pm: 1e-6,
  Å: 1e-4,
  in: 25_400,
  thou: 25.4,
  pt: 25_400 / 72,
  ft: 304_800,
};

/** µm from an OME PhysicalSize value and its unit (µm when the attribute is absent). */
export function omeLengthToMicrons(value: string | undefined, unit: string | undefined): number | null {
  if (value === undefined) return null;
  const size = Number(value);
  const factor = omeUnits[unit ?? 'µm'];
  if (!Number.isFinite(size) || size <= 0 || factor === undefined) return null;
  return size * factor;
}
