import type { RgbImage, SlideImage } from '../../../../compute/image';
import { createClassicalSegmenter, estimateSlideStain } from '../../../../compute/segmentation/classical';
import { closeClassicalThreads } from '../../../../compute/segmentation/classical-threads';
import type { TileSegmentation } from '../../../../compute/segmentation/types';
import { monusegTiles, readAnnotatedTile } from './monuseg';

/**
 * The classical segmenter on the process's worker threads (`thread: 'worker'`, as segmentation's
 * activities run it) gives the labels of the calling thread's (the reference), tile by tile and
 * with several tiles at once, and leaves the caller's event loop free while a tile is segmented.
 */

const crop = { left: 200, top: 200, width: 400, height: 360 };
const { name, mpp } = monusegTiles[0];

afterAll(closeClassicalThreads);

function sameLabels(a: TileSegmentation, b: TileSegmentation): void {
  for (const kind of ['nuclei', 'cells'] as const) {
    expect([a[kind].width, a[kind].height, a[kind].count]).toEqual([
      b[kind].width,
      b[kind].height,
      b[kind].count,
    ]);
    // Per-pixel expect() would take seconds; Buffer.equals compares the bytes at once.
    expect(Buffer.from(a[kind].labels.buffer).equals(Buffer.from(b[kind].labels.buffer))).toBe(true);
  }
}

/** Turns of the event loop (setImmediate callbacks run) while `work` is pending. */
async function loopTurnsDuring<T>(work: () => Promise<T>): Promise<{ turns: number; result: T }> {
  let turns = 0;
  let running = true;
  const turn = () => {
    if (!running) return;
    turns++;
    setImmediate(turn);
  };
  setImmediate(turn);
  const result = await work();
  running = false;
  return { turns, result };
}

describe('the classical segmenter on worker threads', () => {
  let tile: RgbImage;
  beforeAll(async () => {
    tile = (await readAnnotatedTile(name, crop)).image;
  });

  it("gives the labels of the calling thread, with a tile's own stain and with the slide's", async () => {
    // A slide of this one tile: all `estimateSlideStain` reads of it is its tiles' pixels.
    const slide = { readRegion: async () => tile } as unknown as SlideImage;
    const stain = await estimateSlideStain(
      slide,
      [{ x: 0, y: 0, width: tile.width, height: tile.height }],
      mpp,
    );
    for (const slideStain of [undefined, stain]) {
      const reference = await createClassicalSegmenter({}, slideStain).segment(tile, mpp);
      expect(reference.nuclei.count).toBeGreaterThan(10);
      const threaded = await createClassicalSegmenter({}, slideStain, { thread: 'worker' }).segment(
        tile,
        mpp,
      );
      sameLabels(threaded, reference);
    }
  });

  it("segments several tiles at once, each answer its own tile's", async () => {
    const tiles = [0, 1, 2, 3].map((k) => {
      // Quarter-turned copies: four different tiles of the same size.
      const { width, height, data } = tile;
      const out = new Uint8Array(data.length);
      for (let y = 0; y < height; y++)
        for (let x = 0; x < width; x++) {
          const from = k % 2 === 0 ? (y * width + x) * 3 : (y * width + (width - 1 - x)) * 3;
          const to = (k < 2 ? y * width + x : (height - 1 - y) * width + x) * 3;
          out.set(data.subarray(from, from + 3), to);
        }
      return { data: out, width, height };
    });
    const main = createClassicalSegmenter();
    const threaded = createClassicalSegmenter({}, undefined, { thread: 'worker' });
    const references: TileSegmentation[] = [];
    for (const t of tiles) references.push(await main.segment(t, mpp));
    const answers = await Promise.all(tiles.map((t) => threaded.segment(t, mpp)));
    for (const [k, answer] of answers.entries()) sameLabels(answer, references[k]!);
  });

  it('leaves the event loop turning while a tile is segmented; the calling thread holds it', async () => {
    const threaded = await loopTurnsDuring(() =>
      createClassicalSegmenter({}, undefined, { thread: 'worker' }).segment(tile, mpp),
    );
    expect(threaded.turns).toBeGreaterThan(0);
    const inline = await loopTurnsDuring(() => createClassicalSegmenter().segment(tile, mpp));
    expect(inline.turns).toBe(0);
  });

  it('answers a tile that fails with its error, and segments the next', async () => {
    const threaded = createClassicalSegmenter({}, undefined, { thread: 'worker' });
    await expect(threaded.segment(tile, 0)).rejects.toThrow(/mpp must be positive/);
    const reference = await createClassicalSegmenter().segment(tile, mpp);
    sameLabels(await threaded.segment(tile, mpp), reference);
  });
});
