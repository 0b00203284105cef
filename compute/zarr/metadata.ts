import { ComputeError } from '../errors';
import { type DataType, isDataType } from './dtype';

/** The three axes every array we write has: channels, then a plane (`[C, H, W]`). */
export type Shape3 = readonly [number, number, number];

/** What an array of ours is; `ShardedArray` derives the rest (grid, keys, metadata). */
export interface ArraySpec<D extends DataType = DataType> {
  dataType: D;
  /** `[channels, height, width]`. */
  shape: Shape3;
  /** Shard plane `[height, width]`; a shard holds every channel. A multiple of `chunkShape`. */
  shardShape: readonly [number, number];
  /** Inner chunk plane `[height, width]`; an inner chunk holds every channel. */
  chunkShape: readonly [number, number];
  /** What missing chunks and the padding of edge chunks read as. */
  fillValue: number;
  dimensionNames: readonly [string, string, string];
  /** zstd level of the inner chunks. */
  compressionLevel: number;
}

interface NamedConfig {
  name: string;
  configuration?: Record<string, unknown>;
}

export interface ArrayMetadata {
  zarr_format: 3;
  node_type: 'array';
  shape: number[];
  data_type: DataType;
  chunk_grid: { name: 'regular'; configuration: { chunk_shape: number[] } };
  chunk_key_encoding: { name: 'default'; configuration: { separator: '/' } };
  fill_value: number | 'NaN';
  codecs: NamedConfig[];
  attributes: Record<string, unknown>;
  dimension_names: string[];
}

export interface GroupMetadata {
  zarr_format: 3;
  node_type: 'group';
  attributes: Record<string, unknown>;
}

const littleEndian: NamedConfig = { name: 'bytes', configuration: { endian: 'little' } };

export function arrayMetadata(spec: ArraySpec): ArrayMetadata {
  const [channels] = spec.shape;
  return {
    zarr_format: 3,
    node_type: 'array',
    shape: [...spec.shape],
    data_type: spec.dataType,
    chunk_grid: { name: 'regular', configuration: { chunk_shape: [channels, ...spec.shardShape] } },
    chunk_key_encoding: { name: 'default', configuration: { separator: '/' } },
    fill_value: Number.isNaN(spec.fillValue) ? 'NaN' : spec.fillValue,
    codecs: [
      {
        name: 'sharding_indexed',
        configuration: {
          chunk_shape: [channels, ...spec.chunkShape],
          codecs: [
            littleEndian,
            { name: 'zstd', configuration: { level: spec.compressionLevel, checksum: false } },
          ],
          index_codecs: [littleEndian, { name: 'crc32c' }],
          index_location: 'end',
        },
      },
    ],
    attributes: {},
    dimension_names: [...spec.dimensionNames],
  };
}

export function groupMetadata(attributes: Record<string, unknown>): GroupMetadata {
  return { zarr_format: 3, node_type: 'group', attributes };
}

export function encodeJson(document: ArrayMetadata | GroupMetadata): Uint8Array {
  return new TextEncoder().encode(`${JSON.stringify(document, null, 2)}\n`);
}

/**
 * The spec of an array written by `arrayMetadata`. Our reader handles exactly that layout, so
 * anything else (another codec chain, rank or key encoding) is refused rather than misread.
 */
export function parseArrayMetadata(bytes: Uint8Array, where: string): ArraySpec {
  const doc = parseJson(bytes, where);
  const unsupported = (what: string) => new ComputeError('UnsupportedZarr', `${where}: ${what}`);
  if (doc.zarr_format !== 3 || doc.node_type !== 'array') throw unsupported('not a Zarr v3 array');
  if (!isDataType(doc.data_type)) throw unsupported(`data type ${String(doc.data_type)}`);
  const shape = numbers(doc.shape, 3);
  const outer = numbers(record(record(doc.chunk_grid).configuration).chunk_shape, 3);
  const keys = record(doc.chunk_key_encoding);
  if (keys.name !== 'default' || record(keys.configuration).separator !== '/') {
    throw unsupported('chunk keys other than default with "/"');
  }
  const codecs = records(doc.codecs);
  const sharding = codecs.length === 1 && codecs[0]?.name === 'sharding_indexed' ? codecs[0] : undefined;
  if (!sharding) throw unsupported('codecs other than one sharding_indexed');
  const config = record(sharding.configuration);
  const inner = numbers(config.chunk_shape, 3);
  const chain = records(config.codecs);
  const indexChain = records(config.index_codecs);
  if (
    names(chain) !== 'bytes,zstd' ||
    names(indexChain) !== 'bytes,crc32c' ||
    config.index_location !== 'end'
  ) {
    throw unsupported('inner codecs other than bytes+zstd with a bytes+crc32c index at the end');
  }
  if (outer[0] !== shape[0] || inner[0] !== shape[0]) throw unsupported('chunks that split the channels');
  const dimensions = Array.isArray(doc.dimension_names) ? doc.dimension_names.map(String) : [];
  return {
    dataType: doc.data_type,
    shape,
    shardShape: [outer[1], outer[2]],
    chunkShape: [inner[1], inner[2]],
    fillValue: doc.fill_value === 'NaN' ? Number.NaN : Number(doc.fill_value),
    dimensionNames: [dimensions[0] ?? 'c', dimensions[1] ?? 'y', dimensions[2] ?? 'x'],
    compressionLevel: Number(record(chain[1]?.configuration).level ?? 0),
  };
}

export function parseJson(bytes: Uint8Array, where: string): Record<string, unknown> {
  try {
    return record(JSON.parse(new TextDecoder().decode(bytes)));
  } catch (err) {
    throw new ComputeError('CorruptZarr', `${where} is not JSON`, { cause: err });
  }
}

function record(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

function records(value: unknown): Record<string, unknown>[] {
  return Array.isArray(value) ? value.map(record) : [];
}

function names(codecs: Record<string, unknown>[]): string {
  return codecs.map((codec) => codec.name).join();
}

function numbers(value: unknown, length: 3): [number, number, number] {
  if (
    !Array.isArray(value) ||
    value.length !== length ||
    !value.every((n) => Number.isSafeInteger(n) && n >= 0)
  ) {
    throw new ComputeError('UnsupportedZarr', `expected ${length} dimensions, got ${JSON.stringify(value)}`);
  }
  return [value[0], value[1], value[2]];
}
