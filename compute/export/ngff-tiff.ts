import { ComputeError } from '../errors';
import { type KeyValueStore, openArray, PromiseCache, parseJson, type ShardedArray } from '../zarr';
import type { OmeTiffImage, OmeTiffLevel } from './ome-tiff';
import { type OmeXmlChannel, omeColor } from './ome-xml';

/**
 * Adapters from our OME-NGFF stores (H&E pyramid, prediction store, label mask) to
 * `OmeTiffImage`s: the levels are the stores' own, read tile by tile from their inner chunks.
 */

/**
 * A sink that remembers the last `capacity` objects it fetched (their promises, so concurrent
 * tile reads of one shard share one fetch). `ShardedArray` fetches a whole shard per region;
 * with tiles visited shard by shard, each shard is fetched once.
 */
export function cachingSink(sink: KeyValueStore, capacity = 2): KeyValueStore {
  const cache = new PromiseCache<Uint8Array | undefined>(capacity);
  return {
    get: (key, options) => cache.get(key, () => sink.get(key, options)),
    getRange: (key, range, options) => sink.getRange(key, range, options),
    put(key, bytes, options) {
      cache.delete(key);
      return sink.put(key, bytes, options);
    },
  };
}

/** What an NGFF multiscale says about itself: its dataset paths and level-0 pixel size. */
export interface NgffMultiscale {
  name: string | undefined;
  paths: string[];
  physicalSizeUm: { x: number; y: number } | null;
  /** Each dataset's x scale over dataset 0's, when every dataset has one; else `null`. */
  downsamples: number[] | null;
}

const micronsPer: Record<string, number> = {
  nanometer: 1e-3,
  micrometer: 1,
  millimeter: 1e3,
  centimeter: 1e4,
  meter: 1e6,
};

interface MultiscaleDocument {
  name?: unknown;
  axes?: { name?: unknown; unit?: unknown }[];
  datasets?: { path?: unknown; coordinateTransformations?: { type?: unknown; scale?: unknown }[] }[];
}

/** The `ome` attributes of the group `zarr.json` at `key`. */
export async function readOmeAttributes(
  sink: KeyValueStore,
  key: string,
  signal?: AbortSignal,
): Promise<Record<string, unknown>> {
  const bytes = await sink.get(key, { signal });
  if (bytes === undefined) throw new ComputeError('UnsupportedZarr', `no ${key}`);
  const attributes = parseJson(bytes, key).attributes as { ome?: Record<string, unknown> } | undefined;
  if (!attributes?.ome) throw new ComputeError('UnsupportedZarr', `${key} has no ome attributes`);
  return attributes.ome;
}

/**
 * Multiscale `index` of an `ome` attributes block. The physical size is the scale of dataset 0
 * on y and x (its only transformation is a scale in our stores), in microns when the axes carry
 * a length unit, else `null`.
 */
export function parseMultiscale(ome: Record<string, unknown>, index: number, where: string): NgffMultiscale {
  const multiscales = ome.multiscales as MultiscaleDocument[] | undefined;
  const doc = multiscales?.[index];
  const paths = (doc?.datasets ?? []).map((d) => d.path);
  if (!doc || paths.length === 0 || !paths.every((p): p is string => typeof p === 'string')) {
    throw new ComputeError('UnsupportedZarr', `${where}: no multiscale ${index} with datasets`);
  }
  const axes = doc.axes ?? [];
  const yAxis = axes.findIndex((a) => a.name === 'y');
  const xAxis = axes.findIndex((a) => a.name === 'x');
  const scales = (doc.datasets ?? []).map(
    (d) => d.coordinateTransformations?.find((t) => t.type === 'scale')?.scale,
  );
  const scale = scales[0];
  const xScales = scales.map((s) => (Array.isArray(s) ? s[xAxis] : undefined));
  const downsamples = xScales.every((x): x is number => typeof x === 'number' && x > 0)
    ? xScales.map((x) => x / xScales[0]!)
    : null;
  const factor = micronsPer[String(axes[xAxis]?.unit)];
  let physicalSizeUm: NgffMultiscale['physicalSizeUm'] = null;
  if (
    factor !== undefined &&
    axes[yAxis]?.unit === axes[xAxis]?.unit &&
    Array.isArray(scale) &&
    typeof scale[xAxis] === 'number' &&
    typeof scale[yAxis] === 'number'
  ) {
    physicalSizeUm = { x: scale[xAxis] * factor, y: scale[yAxis] * factor };
  }
  return { name: typeof doc.name === 'string' ? doc.name : undefined, paths, physicalSizeUm, downsamples };
}

function join(prefix: string, path: string): string {
  const base = prefix.replace(/\/+$/, '');
  return base === '' ? path : `${base}/${path}`;
}

async function openLevels(
  sink: KeyValueStore,
  prefix: string,
  paths: readonly string[],
  signal?: AbortSignal,
): Promise<ShardedArray[]> {
  const arrays: ShardedArray[] = [];
  for (const path of paths) arrays.push(await openArray(sink, join(prefix, path), signal));
  return arrays;
}

/**
 * Levels whose plane `p` comes from `planes[p][level]`: every plane's arrays have the same
 * shapes (checked), and each `[C, H, W]` array gives one plane (C = 1) or one RGB plane (C = 3).
 */
function levelsOf(
  sink: KeyValueStore,
  planes: readonly ShardedArray[][],
  downsamples: readonly number[] | null,
): OmeTiffLevel[] {
  const first = planes[0]!;
  for (const arrays of planes) {
    if (arrays.length !== first.length) {
      throw new ComputeError('UnsupportedZarr', 'channels of one image with different level counts');
    }
    arrays.forEach((array, l) => {
      const [, h, w] = array.spec.shape;
      const [, fh, fw] = first[l]!.spec.shape;
      if (h !== fh || w !== fw || array.spec.dataType !== first[l]!.spec.dataType) {
        throw new ComputeError(
          'UnsupportedZarr',
          `${array.path}: not the shape or type of ${first[l]!.path}`,
        );
      }
    });
  }
  return first.map((array, l) => ({
    width: array.spec.shape[2],
    height: array.spec.shape[1],
    downsample: downsamples?.[l],
    readTile: (plane, x, y, width, height, signal) => {
      const source = planes[plane]?.[l];
      if (!source) throw new RangeError(`no plane ${plane}`);
      return source.readRegion(sink, { x, y, width, height }, signal);
    },
  }));
}

function tileBlockOf(array: ShardedArray, tileSize: number): number {
  return Math.max(1, Math.floor(array.spec.shardShape[1] / tileSize));
}

export interface NgffImageOptions {
  /** The OME `Image` name; defaults to the multiscale's. */
  name?: string;
  /** Tile edge the writer will use (default 512), to visit tiles shard by shard. */
  tileSize?: number;
  signal?: AbortSignal;
}

/** The H&E pyramid (uint8 `[3, H, W]` levels) as one RGB image. */
export async function heTiffImage(
  sink: KeyValueStore,
  options: NgffImageOptions = {},
): Promise<OmeTiffImage> {
  const cached = cachingSink(sink);
  const ome = await readOmeAttributes(cached, 'zarr.json', options.signal);
  const multiscale = parseMultiscale(ome, 0, 'H&E zarr.json');
  const arrays = await openLevels(cached, '', multiscale.paths, options.signal);
  if (!arrays.every((a) => a.spec.dataType === 'uint8' && a.spec.shape[0] === 3)) {
    throw new ComputeError('UnsupportedZarr', 'the H&E levels are not 3-channel uint8');
  }
  return {
    name: options.name ?? multiscale.name ?? 'H&E',
    pixelType: 'uint8',
    rgb: true,
    channels: [{ name: 'RGB' }],
    physicalSizeUm: multiscale.physicalSizeUm,
    levels: levelsOf(cached, [arrays], multiscale.downsamples),
    tileBlock: tileBlockOf(arrays[0]!, options.tileSize ?? 512),
  };
}

/** A label image (uint32 `[1, H, W]` levels, such as the segmentation mask) as one channel. */
export async function labelTiffImage(
  sink: KeyValueStore,
  options: NgffImageOptions = {},
): Promise<OmeTiffImage> {
  const cached = cachingSink(sink);
  const ome = await readOmeAttributes(cached, 'zarr.json', options.signal);
  const multiscale = parseMultiscale(ome, 0, 'label zarr.json');
  const arrays = await openLevels(cached, '', multiscale.paths, options.signal);
  if (!arrays.every((a) => a.spec.dataType === 'uint32' && a.spec.shape[0] === 1)) {
    throw new ComputeError('UnsupportedZarr', 'the label levels are not 1-channel uint32');
  }
  const name = options.name ?? multiscale.name ?? 'labels';
  return {
    name,
    pixelType: 'uint32',
    channels: [{ name }],
    physicalSizeUm: multiscale.physicalSizeUm,
    levels: levelsOf(cached, [arrays], multiscale.downsamples),
    tileBlock: tileBlockOf(arrays[0]!, options.tileSize ?? 512),
  };
}

export interface PredictionImageOptions extends NgffImageOptions {
  /** Markers to include, in this order; default every marker the store lists. */
  markers?: readonly string[];
}

/**
 * The prediction store (one multiscale per marker at its root) as one uint16 image with a
 * channel per marker, named and coloured as each marker's `omero` says; pixels are the stored
 * values (the store's `valueScale` maps them to the model's units).
 */
export async function predictionTiffImage(
  sink: KeyValueStore,
  options: PredictionImageOptions = {},
): Promise<OmeTiffImage> {
  const { signal } = options;
  const cached = cachingSink(sink);
  const ome = await readOmeAttributes(cached, 'zarr.json', signal);
  const count = Array.isArray(ome.multiscales) ? ome.multiscales.length : 0;
  const multiscales = Array.from({ length: count }, (_, i) =>
    parseMultiscale(ome, i, 'prediction zarr.json'),
  );
  const byName = new Map(multiscales.map((m) => [m.name, m]));
  const wanted = options.markers ?? multiscales.map((m) => m.name ?? '');
  const planes: ShardedArray[][] = [];
  const channels: OmeXmlChannel[] = [];
  for (const marker of wanted) {
    const multiscale = byName.get(marker);
    if (!multiscale)
      throw new ComputeError('UnsupportedZarr', `the prediction store has no marker ${marker}`);
    const arrays = await openLevels(cached, '', multiscale.paths, signal);
    if (!arrays.every((a) => a.spec.dataType === 'uint16' && a.spec.shape[0] === 1)) {
      throw new ComputeError('UnsupportedZarr', `marker ${marker} is not 1-channel uint16`);
    }
    planes.push(arrays);
    channels.push({ name: marker, color: await markerColor(cached, multiscale, signal) });
  }
  if (planes.length === 0) throw new ComputeError('UnsupportedZarr', 'no markers to export');
  const first = multiscales.find((m) => m.name === wanted[0])!;
  return {
    name: options.name ?? 'prediction',
    pixelType: 'uint16',
    channels,
    physicalSizeUm: first.physicalSizeUm,
    levels: levelsOf(cached, planes, first.downsamples),
    tileBlock: tileBlockOf(planes[0]![0]!, options.tileSize ?? 512),
  };
}

/** The `omero` colour of the marker's own image group (the parent of its level paths). */
async function markerColor(
  sink: KeyValueStore,
  multiscale: NgffMultiscale,
  signal?: AbortSignal,
): Promise<number | undefined> {
  const group = multiscale.paths[0]!.split('/').slice(0, -1).join('/');
  if (group === '') return undefined;
  const bytes = await sink.get(`${group}/zarr.json`, { signal });
  if (!bytes) return undefined;
  const attributes = parseJson(bytes, `${group}/zarr.json`).attributes as
    | { ome?: { omero?: { channels?: { color?: unknown }[] } } }
    | undefined;
  const color = attributes?.ome?.omero?.channels?.[0]?.color;
  return typeof color === 'string' && /^[0-9a-fA-F]{6}$/.test(color) ? omeColor(color) : undefined;
}

/**
 * The image from its level of `width` x `height` down: that level becomes the full resolution
 * (its pixel size the image's), the finer ones are left out. The stores' pyramids all halve
 * level 0 rounding down and the prediction's level 0 is an H&E level, so the H&E and the mask
 * have a level on the prediction's grid: taken from there, every series of the file shares one
 * size and pixel size and overlays pixel for pixel, with no pixel resampled.
 */
export function fromLevelOfSize(image: OmeTiffImage, width: number, height: number): OmeTiffImage {
  const first = image.levels.findIndex((l) => l.width === width && l.height === height);
  if (first < 0) {
    throw new ComputeError('UnsupportedZarr', `${image.name} has no level of ${width} x ${height}`);
  }
  const downsampleOf = (level: OmeTiffLevel) => level.downsample ?? image.levels[0]!.width / level.width;
  const base = downsampleOf(image.levels[first]!);
  const size = image.physicalSizeUm;
  return {
    ...image,
    physicalSizeUm: size && { x: size.x * base, y: size.y * base },
    levels: image.levels.slice(first).map((level) => ({ ...level, downsample: downsampleOf(level) / base })),
  };
}
