import { expandLabels } from '../../../../compute/segmentation/expand';
import type { LabelImage } from '../../../../compute/segmentation/types';

/** Three small nuclei, two of them close enough for their cells to meet. */
function nuclei(): LabelImage {
  const width = 40;
  const height = 30;
  const labels = new Uint32Array(width * height);
  const square = (x0: number, y0: number, side: number, label: number) => {
    for (let y = y0; y < y0 + side; y++) for (let x = x0; x < x0 + side; x++) labels[y * width + x] = label;
  };
  square(5, 5, 3, 1);
  square(14, 6, 2, 2);
  square(30, 20, 4, 3);
  return { labels, width, height, count: 3 };
}

describe('cells grown from nuclei', () => {
  const input = nuclei();
  const distance = 4.5;
  const cells = expandLabels(input, distance);
  const { width } = input;

  it('never overwrites a nucleus, and keeps the count', () => {
    expect(cells.count).toBe(3);
    for (let i = 0; i < input.labels.length; i++)
      if (input.labels[i] !== 0) expect(cells.labels[i]).toBe(input.labels[i]);
  });

  it('labels exactly the background within the bound, with the nearest nucleus', () => {
    for (let i = 0; i < input.labels.length; i++) {
      if (input.labels[i] !== 0) continue;
      let best = Number.POSITIVE_INFINITY;
      const nearestLabels = new Set<number>();
      for (let j = 0; j < input.labels.length; j++) {
        if (input.labels[j] === 0) continue;
        const d = ((i % width) - (j % width)) ** 2 + (Math.floor(i / width) - Math.floor(j / width)) ** 2;
        if (d < best) {
          best = d;
          nearestLabels.clear();
        }
        if (d === best) nearestLabels.add(input.labels[j]!);
      }
      if (best > distance * distance) expect(cells.labels[i]).toBe(0);
      else expect(nearestLabels.has(cells.labels[i]!)).toBe(true);
    }
  });

  it('answers a copy when there is nothing to grow', () => {
    const same = expandLabels(input, 0);
    expect(same.labels).toEqual(input.labels);
    expect(same.labels).not.toBe(input.labels);
  });
});
