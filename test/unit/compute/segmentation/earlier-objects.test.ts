import {
  EarlierTileObjects,
  earlierNeighbours,
  type TileObjects,
} from '../../../../compute/segmentation/objects';
import { planSegmentationTiles, type SegmentationTile } from '../../../../compute/segmentation/tiles';

/** Objects that stand for a tile: only the tile matters to what is kept. */
function objectsOf(tile: SegmentationTile): TileObjects {
  return {
    tile,
    count: 0,
    measurements: new Float64Array(0),
    runStart: new Uint32Array(1),
    runs: new Uint32Array(0),
    cutObjects: 0,
  };
}

describe('EarlierTileObjects', () => {
  // 10 cores across, 30 down; the last row and column cut short.
  const tiles = planSegmentationTiles({ widthPx: 9_500, heightPx: 29_600 }, { coreSize: 1024 });
  const haloPx = 81;

  it('answers every earlier neighbour from memory in plan order, holding about one row', async () => {
    const loads: number[] = [];
    const earlier = new EarlierTileObjects(tiles, haloPx, async (index) => {
      loads.push(index);
      return objectsOf(tiles[index]!);
    });
    let most = 0;
    for (const tile of tiles) {
      const got = await earlier.of(tile);
      expect(got.map((o) => o.tile.index)).toEqual(
        earlierNeighbours(tiles, tile, haloPx).map((t) => t.index),
      );
      earlier.add(objectsOf(tile));
      most = Math.max(most, earlier.size);
    }
    expect(loads).toEqual([]);
    // The row above from the left neighbour on, and the row so far: one row and two tiles.
    expect(most).toBeLessThanOrEqual(10 + 2);
  });

  it('loads what it was not given, as a retry that starts mid-plan does', async () => {
    const loads: number[] = [];
    const earlier = new EarlierTileObjects(tiles, haloPx, async (index) => {
      loads.push(index);
      return objectsOf(tiles[index]!);
    });
    const start = tiles[45]!;
    await earlier.of(start);
    expect(loads.sort((a, b) => a - b)).toEqual(earlierNeighbours(tiles, start, haloPx).map((t) => t.index));
  });

  it('keeps what a plan with gaps (tissue only) still needs', async () => {
    // Every third tile of the grid left out, re-indexed as a tissue plan would be.
    const sparse = tiles.filter((_, i) => i % 3 !== 1).map((t, index) => ({ ...t, index }));
    const earlier = new EarlierTileObjects(sparse, haloPx, async () => {
      throw new Error('every neighbour was added before');
    });
    for (const tile of sparse) {
      const got = await earlier.of(tile);
      expect(got.map((o) => o.tile.index)).toEqual(
        earlierNeighbours(sparse, tile, haloPx).map((t) => t.index),
      );
      earlier.add(objectsOf(tile));
    }
  });
});
