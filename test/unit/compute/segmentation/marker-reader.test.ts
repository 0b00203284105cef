import { readPredictionLayout } from '../../../../compute/prediction/store';
import { predictionMarkerReader } from '../../../../compute/segmentation';
import { memoryStore } from '../../../../compute/zarr';
import { predictedValue, predictionLayout, writeSyntheticPrediction } from '../export/sources';

describe('predictionMarkerReader', () => {
  it("reads a uint16 store back in the model's units, from the scale the store states", async () => {
    const sink = memoryStore();
    // An output range that is not 0..1: both the scale and the offset matter.
    const written = predictionLayout({ widthPx: 1100, heightPx: 700, heLevel: 1, outputRange: [-1, 3] });
    await writeSyntheticPrediction(sink, written);
    const layout = await readPredictionLayout(sink);
    expect(layout.outputRange[0]).toBe(-1);
    expect(layout.outputRange[1]).toBeCloseTo(3, 12);
    const read = predictionMarkerReader(sink, layout);
    // H&E level-0 pixels: the store's level 0 is H&E level 1, so each store pixel covers 2 x 2.
    const rect = { x: 1201, y: 1050, width: 37, height: 21 };
    for (const [m, marker] of written.markers.entries()) {
      const values = await read(marker, rect);
      let worst = 0;
      for (let y = 0; y < rect.height; y++) {
        for (let x = 0; x < rect.width; x++) {
          const expected = predictedValue(m, Math.floor((rect.x + x) / 2), Math.floor((rect.y + y) / 2));
          worst = Math.max(worst, Math.abs(values[y * rect.width + x]! - expected));
        }
      }
      // Half a stored step (4 / 65535 / 2) plus float32 rounding.
      expect({ marker, within: worst <= 2 / 65535 + 1e-6 }).toEqual({ marker, within: true });
    }
  });
});
