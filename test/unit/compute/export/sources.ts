import path from 'node:path';
import { toStored } from '../../../../compute/prediction/kernels';
import {
  finishPredictionStore,
  markerArray,
  type PredictionStoreLayout,
} from '../../../../compute/prediction/store';
import { buildHePyramid } from '../../../../compute/pyramid';
import { type TileObjects, writeLabelMask } from '../../../../compute/segmentation';
import type { SegmentationTile } from '../../../../compute/segmentation/tiles';
import { openTiffSlide } from '../../../../compute/slide';
import { fileSource } from '../../../../compute/source';
import type { KeyValueStore } from '../../../../compute/zarr';
import { wsiDir } from '../helpers';

/** A smooth, marker-dependent model value with some fine texture, so compression is realistic. */
export function predictedValue(marker: number, x: number, y: number): number {
  return (
    0.5 +
    0.3 * Math.sin((x + 37 * marker) / 53) * Math.cos((y - 11 * marker) / 71) +
    0.05 * Math.sin((x * y) / 997 + marker)
  );
}

/**
 * A finished prediction store written straight through its arrays: level-0 shards from
 * `predictedValue` (a square of background left at 0 so some chunks are missing), then the
 * real `finishPredictionStore` for the levels, marker groups and root.
 */
export async function writeSyntheticPrediction(
  sink: KeyValueStore,
  layout: PredictionStoreLayout,
  value: (marker: number, x: number, y: number) => number = predictedValue,
): Promise<void> {
  for (const [m, marker] of layout.markers.entries()) {
    const array = markerArray(layout, marker, 0);
    await array.writeMetadata(sink);
    const { chunkHeight, chunkWidth, chunksX, chunkLength } = array.geometry;
    const shard = array.allocateShard();
    for (let sy = 0; sy < array.shardsY; sy++) {
      for (let sx = 0; sx < array.shardsX; sx++) {
        shard.fill(0);
        const extent = array.shardExtent(sy, sx);
        for (let y = 0; y < extent.height; y++) {
          const gy = sy * layout.shardSize + y;
          for (let x = 0; x < extent.width; x++) {
            const gx = sx * layout.shardSize + x;
            if (gx < chunkWidth && gy < chunkHeight) continue;
            const k = Math.floor(y / chunkHeight) * chunksX + Math.floor(x / chunkWidth);
            shard[k * chunkLength + (y % chunkHeight) * chunkWidth + (x % chunkWidth)] = toStored(
              value(m, gx, gy),
              layout.outputRange,
            );
          }
        }
        await array.writeShard(sink, sy, sx, shard);
      }
    }
  }
  await finishPredictionStore({ sink, layout, statistics: {} });
}

export function predictionLayout(
  overrides: Partial<PredictionStoreLayout> & Pick<PredictionStoreLayout, 'widthPx' | 'heightPx'>,
): PredictionStoreLayout {
  return {
    markers: ['DAPI', 'CD3', 'PanCK'],
    heLevel: 1,
    pixelSizeUm: 0.998,
    shardSize: 1024,
    chunkSize: 512,
    model: 'synthetic',
    outputRange: [0, 1],
    ...overrides,
  };
}

/** The CMU-1 small region (2220 x 2967) as an H&E pyramid; answers its mpp. */
export async function writeCmuPyramid(sink: KeyValueStore): Promise<number> {
  const source = await fileSource(path.join(wsiDir, 'CMU-1-Small-Region.svs'));
  try {
    const slide = await openTiffSlide(source);
    const mpp = slide.probe.effectiveMpp!;
    await buildHePyramid({ image: slide, sink, mpp, name: 'H&E', shardSize: 1024, chunkSize: 512 });
    return mpp;
  } finally {
    await source.close();
  }
}

/**
 * A label mask through the real `writeLabelMask`: one tile per 600 px square, each holding
 * a few rectangular "cells" as runs.
 */
export async function writeSyntheticMask(
  sink: KeyValueStore,
  size: { widthPx: number; heightPx: number; pixelSizeUm: number },
): Promise<void> {
  const tiles: SegmentationTile[] = [];
  const core = 600;
  for (let y = 0; y < size.heightPx; y += core) {
    for (let x = 0; x < size.widthPx; x += core) {
      tiles.push({
        index: tiles.length,
        x,
        y,
        width: Math.min(core, size.widthPx - x),
        height: Math.min(core, size.heightPx - y),
      });
    }
  }
  const perTile = 5;
  const objectsOf = (tile: SegmentationTile): TileObjects => {
    const runs: number[] = [];
    const runStart = [0];
    for (let k = 0; k < perTile; k++) {
      const left = tile.x + 10 + k * 100;
      const top = tile.y + 20 + k * 90;
      for (let y = top; y < Math.min(top + 40 + k * 5, tile.y + tile.height); y++) {
        if (left < tile.x + tile.width) runs.push(y, left, Math.min(left + 30 + k * 7, tile.x + tile.width));
      }
      runStart.push(runs.length / 3);
    }
    return {
      tile,
      count: perTile,
      measurements: new Float64Array(0),
      runStart: Uint32Array.from(runStart),
      runs: Uint32Array.from(runs),
      cutObjects: 0,
    };
  };
  await writeLabelMask(sink, {
    ...size,
    tiles,
    haloPx: 0,
    labelOffsets: tiles.map((t) => t.index * perTile),
    loadTileObjects: async (index) => objectsOf(tiles[index]!),
    shardSize: 1024,
    chunkSize: 512,
  });
}
