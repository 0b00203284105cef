import { ComputeError } from '../errors';
import type { ImageLevel, Region, RgbImage, SlideImage } from '../image';
import { type KeyValueStore, openArray, parseJson, RegionReader, type ShardedArray } from '../zarr';
import { planarToRgb } from './kernels';

/**
 * Decoded H&E chunks kept per level (`RegionReader`): 85 chunks of 512 x 512, more than the
 * chunks under one band column of a prediction at 0.5 µm a pixel (8 x 1 shards of 1024 and
 * their halos: 18 x 4 chunks), whose neighbouring column shares half of them. A column the
 * cache cannot hold whole loses all of that sharing: its oldest chunks, the first the next
 * column needs, are the first it drops.
 */
const CACHE_BYTES = 64 << 20;

/**
 * A pyramid written by `buildHePyramid`, seen through the same `SlideImage` contract as the
 * slide it came from, so later steps (tissue detection, thumbnails, tiling) read either alike.
 * Regions read and decode only the inner chunks they touch, and recently decoded chunks are kept
 * for the regions next to them.
 */
export async function openHePyramid(sink: KeyValueStore, signal?: AbortSignal): Promise<SlideImage> {
  const group = await sink.get('zarr.json', { signal });
  if (group === undefined)
    throw new ComputeError('UnsupportedZarr', 'no group zarr.json: the pyramid is incomplete');
  const arrays: ShardedArray[] = [];
  for (const path of datasetPaths(parseJson(group, 'zarr.json'))) {
    const array = await openArray(sink, path, signal);
    if (array.spec.dataType !== 'uint8' || array.spec.shape[0] !== 3) {
      throw new ComputeError('UnsupportedZarr', `${path} is not a 3-channel uint8 array`);
    }
    arrays.push(array);
  }
  const readers = arrays.map((array) => new RegionReader(array, sink, CACHE_BYTES));
  const base = arrays[0]!.spec.shape;
  const levels: ImageLevel[] = arrays.map(({ spec: { shape } }) => ({
    widthPx: shape[2],
    heightPx: shape[1],
    downsample: (base[2] / shape[2] + base[1] / shape[1]) / 2,
  }));
  return {
    widthPx: base[2],
    heightPx: base[1],
    levels,
    async readRegion(region: Region, regionSignal?: AbortSignal): Promise<RgbImage> {
      const reader = readers[region.level];
      if (reader === undefined) throw new RangeError(`no level ${region.level}`);
      const planar = await reader.readRegion(region, regionSignal);
      return planarToRgb(planar as Uint8Array, region.width, region.height);
    },
  };
}

/** A whole level as one RGB image: for the small levels that tissue detection and thumbnails use. */
export async function readPyramidLevel(
  sink: KeyValueStore,
  level: number,
  signal?: AbortSignal,
): Promise<RgbImage> {
  const image = await openHePyramid(sink, signal);
  const size = image.levels[level];
  if (size === undefined) throw new RangeError(`no level ${level}`);
  return image.readRegion({ level, x: 0, y: 0, width: size.widthPx, height: size.heightPx }, signal);
}

function datasetPaths(group: Record<string, unknown>): string[] {
  const ome = group.attributes as
    | { ome?: { multiscales?: { datasets?: { path?: unknown }[] }[] } }
    | undefined;
  const paths = (ome?.ome?.multiscales?.[0]?.datasets ?? []).map((d) => d.path);
  if (paths.length === 0 || !paths.every((p): p is string => typeof p === 'string')) {
    throw new ComputeError('UnsupportedZarr', 'group zarr.json has no multiscales datasets');
  }
  return paths;
}
