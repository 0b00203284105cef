import { M, MEASUREMENT_COUNT } from '../../../../compute/segmentation/features';
import {
  decodeTileObjects,
  dropDuplicateObjects,
  encodeTileObjects,
  type TileObjects,
} from '../../../../compute/segmentation/objects';

/**
 * Stored tile objects keep each cell's nucleus as runs (format 2); files written before
 * (format 1, no nuclei) still read, so a run resumed across the upgrade goes on.
 */
function objects(withNuclei: boolean): TileObjects {
  const measurements = new Float64Array(2 * MEASUREMENT_COUNT).map((_, i) => i / 7);
  [
    [18, 1030, 5, 1040, 7],
    [10, 1100, 9, 1110, 10],
  ].forEach(([area, x0, y0, x1, y1], k) => {
    const b = k * MEASUREMENT_COUNT;
    measurements[b + M.area] = area!;
    measurements[b + M.bbox_min_x] = x0!;
    measurements[b + M.bbox_min_y] = y0!;
    measurements[b + M.bbox_max_x] = x1!;
    measurements[b + M.bbox_max_y] = y1!;
  });
  return {
    tile: { index: 3, x: 1024, y: 0, width: 1024, height: 1024 },
    count: 2,
    measurements,
    runStart: Uint32Array.from([0, 2, 3]),
    runs: Uint32Array.from([5, 1030, 1040, 6, 1031, 1039, 9, 1100, 1110]),
    ...(withNuclei && {
      nuclei: {
        runStart: Uint32Array.from([0, 1, 2]),
        runs: Uint32Array.from([5, 1033, 1036, 9, 1104, 1106]),
      },
    }),
    cutObjects: 1,
  };
}

const version = (bytes: Uint8Array) => new DataView(bytes.buffer, bytes.byteOffset).getUint32(4, true);

describe('tile objects on disk', () => {
  it('keeps the nuclei in format 2', () => {
    const bytes = encodeTileObjects(objects(true));
    expect(version(bytes)).toBe(2);
    expect(decodeTileObjects(bytes)).toEqual(objects(true));
  });

  it('reads format 1, without nuclei', () => {
    const bytes = encodeTileObjects(objects(false));
    expect(version(bytes)).toBe(1);
    const decoded = decodeTileObjects(bytes);
    expect(decoded).toEqual(objects(false));
    expect(decoded.nuclei).toBeUndefined();
  });

  it('refuses an unknown version', () => {
    const bytes = encodeTileObjects(objects(true));
    new DataView(bytes.buffer, bytes.byteOffset).setUint32(4, 3, true);
    expect(() => decodeTileObjects(bytes)).toThrow(/version 3/);
  });

  it('drops a duplicate with its nucleus', () => {
    const mine = objects(true);
    // An earlier tile's object covering the first object whole.
    const earlier: TileObjects = {
      ...objects(false),
      count: 1,
      measurements: mine.measurements.slice(0, MEASUREMENT_COUNT),
      runStart: Uint32Array.from([0, 2]),
      runs: mine.runs.slice(0, 6),
    };
    const kept = dropDuplicateObjects(mine, [earlier]);
    expect(kept.count).toBe(1);
    expect(Array.from(kept.runs)).toEqual([9, 1100, 1110]);
    expect(kept.nuclei).toEqual({
      runStart: Uint32Array.from([0, 1]),
      runs: Uint32Array.from([9, 1104, 1106]),
    });
  });
});
