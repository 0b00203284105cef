import { markerArray, type PredictionStoreLayout, storedScale } from '../prediction/store';
import type { KeyValueStore } from '../zarr';
import type { PixelRect } from './tables';

/**
 * `readMarkerRegion` for `writeMarkerTables` over a prediction store, in the model's units (the
 * stored uint16 scaled back): the store's level 0 is H&E level `layout.heLevel` (`2 ** heLevel`
 * level-0 pixels a side), so each level-0 pixel takes the value of the store pixel it lies in
 * (nearest); past the store's edge (its size was rounded down) the last row or column is used.
 */
export function predictionMarkerReader(
  sink: KeyValueStore,
  layout: PredictionStoreLayout,
): (marker: string, rect: PixelRect, signal?: AbortSignal) => Promise<Float32Array> {
  const step = 2 ** layout.heLevel;
  const { scale, offset } = storedScale(layout.outputRange);
  return async (marker, rect, signal) => {
    const array = markerArray(layout, marker, 0);
    const [, storeHeight, storeWidth] = array.spec.shape;
    const at = (v: number, size: number) => Math.min(size - 1, Math.floor(v / step));
    const x0 = at(rect.x, storeWidth);
    const y0 = at(rect.y, storeHeight);
    const x1 = at(rect.x + rect.width - 1, storeWidth) + 1;
    const y1 = at(rect.y + rect.height - 1, storeHeight) + 1;
    const region = { x: x0, y: y0, width: x1 - x0, height: y1 - y0 };
    const values = (await array.readRegion(sink, region, signal)) as Uint16Array;
    const out = new Float32Array(rect.width * rect.height);
    const columns = Int32Array.from({ length: rect.width }, (_, x) => at(rect.x + x, storeWidth) - x0);
    for (let y = 0; y < rect.height; y++) {
      const from = (at(rect.y + y, storeHeight) - y0) * region.width;
      const to = y * rect.width;
      for (let x = 0; x < rect.width; x++) out[to + x] = offset + scale * values[from + columns[x]!]!;
    }
    return out;
  };
}
