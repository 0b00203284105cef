import type { StoreArray } from '../../../sdk';
import { type Layer, onHePixels } from '../../../web/src/viewer/sources';

/** A layer of `levels` halvings from `width` x `height`, `pixelSize` world units per level-0 pixel. */
function layer(width: number, height: number, pixelSize: number, levels: number): Layer {
  return {
    id: 'layer',
    kind: 'channel',
    label: 'layer',
    levels: Array.from({ length: levels }, (_, k) => ({
      array: {} as StoreArray,
      width: Math.floor(width / 2 ** k),
      height: Math.floor(height / 2 ** k),
      chunkWidth: 256,
      chunkHeight: 256,
      pixelSize: pixelSize * 2 ** k,
    })),
  };
}

describe("a layer laid on the H&E's pixels", () => {
  // 650 x 743 px at 0.25 µm: the scale a user set after ingest.
  const he = layer(650, 743, 0.25, 2);

  test('a marker store made at the same scale is left where it is', () => {
    const marker = layer(325, 371, 0.5, 2);
    expect(onHePixels(he, marker).levels.map((l) => l.pixelSize)).toEqual([0.5, 1]);
  });

  test('a store made at an older scale covers the same H&E pixels, whatever scale it states', () => {
    // Predicted when the slide was thought to be 0.5 µm a pixel: its level 0 is two H&E pixels.
    const marker = layer(325, 371, 1, 2);
    expect(onHePixels(he, marker).levels.map((l) => l.pixelSize)).toEqual([0.5, 1]);
    // A label mask is made on the H&E's own pixels.
    const mask = layer(650, 743, 0.5, 2);
    expect(onHePixels(he, mask).levels.map((l) => l.pixelSize)).toEqual([0.25, 0.5]);
  });

  test("an odd size rounded down still finds the power-of-two block, and the H&E's pixel unit is kept", () => {
    const pixels = layer(2221, 2967, 1, 3);
    const marker = layer(555, 741, 2, 2);
    expect(onHePixels(pixels, marker).levels.map((l) => l.pixelSize)).toEqual([4, 8]);
  });
});
