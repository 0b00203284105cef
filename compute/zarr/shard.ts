import { promisify } from 'node:util';
import { constants, ZstdCompress, type ZstdOptions, zstdCompressSync, zstdDecompress } from 'node:zlib';
import { ComputeError } from '../errors';
import { crc32c } from './crc32c';
import { allocate, bytesOf, type DataType, elementBytes, type TypedArray, viewOf } from './dtype';

const decompress = promisify(zstdDecompress);

/** Offset and size of an inner chunk that was left out because it holds only the fill value. */
const MISSING = 0xffff_ffff_ffff_ffffn;
const ENTRY_BYTES = 16;
const CRC_BYTES = 4;

/**
 * Inner chunks of one shard compressed or decompressed at once: as many as libuv has threads
 * (`UV_THREADPOOL_SIZE`, default 4), which run them. Each one in flight holds a zstd context and
 * a chunk-sized output buffer, so starting all of a shard's chunks together (64 for a 4096 shard
 * of 512 chunks) held about a shard's worth of native memory and garbage on top of the shard.
 */
const CHUNK_CODEC_CONCURRENCY = Math.min(1024, Math.max(1, Number(process.env.UV_THREADPOOL_SIZE) || 4));

/**
 * The inside of one shard: a grid of `chunksY x chunksX` inner chunks, each holding every
 * channel (`[channels, chunkHeight, chunkWidth]`, C order).
 *
 * A shard in memory is chunk-major: inner chunk `k = cy * chunksX + cx` occupies elements
 * `[k * chunkLength, (k + 1) * chunkLength)` in exactly the layout the `bytes` codec writes, so
 * every chunk is compressed from a view of the shard buffer, with no copy.
 */
export interface ShardGeometry {
  readonly dataType: DataType;
  readonly fillValue: number;
  readonly channels: number;
  readonly chunkHeight: number;
  readonly chunkWidth: number;
  readonly chunksY: number;
  readonly chunksX: number;
  /** Elements in one inner chunk. */
  readonly chunkLength: number;
}

/** How much of a shard lies inside the array, in pixels from its top-left corner. */
export interface ShardExtent {
  readonly height: number;
  readonly width: number;
}

/** Where each inner chunk's bytes are in an encoded shard; `undefined` for a missing chunk. */
export type ShardIndex = ReadonlyArray<{ offset: number; size: number } | undefined>;

export function chunkCount(g: ShardGeometry): number {
  return g.chunksY * g.chunksX;
}

export function indexBytes(g: ShardGeometry): number {
  return chunkCount(g) * ENTRY_BYTES + CRC_BYTES;
}

/** A chunk-major shard buffer, every element the fill value. */
export function allocateShard<D extends DataType>(g: ShardGeometry & { dataType: D }): TypedArray<D> {
  const data = allocate(g.dataType, chunkCount(g) * g.chunkLength);
  if (g.fillValue !== 0) data.fill(g.fillValue);
  return data;
}

/**
 * What encodes a shard buffer for `ShardedArray.writeShard`: `encodeShard`, or an encoder of the
 * same layout that runs where the buffer lives (`encodeShardSync` on a worker thread).
 */
export type ShardEncoder = (
  g: ShardGeometry,
  data: TypedArray,
  extent: ShardExtent,
  level: number,
) => Promise<Uint8Array | undefined>;

/**
 * Encodes a chunk-major shard buffer: each inner chunk through `bytes` and `zstd`, then the
 * index (`bytes` little-endian, `crc32c`) at the end. Chunks past `extent` are left out and the
 * part of an edge chunk past it is overwritten with the fill value in `data`, so the bytes do
 * not depend on what the buffer held there. Resolves `undefined` when every chunk is missing.
 * zstd runs on libuv's threads, so the calling thread goes on meanwhile.
 */
export async function encodeShard(
  g: ShardGeometry,
  data: TypedArray,
  extent: ShardExtent,
  level: number,
): Promise<Uint8Array | undefined> {
  const chunks = await mapLimited(chunkCount(g), async (k) => {
    const chunk = chunkToStore(g, data, extent, k);
    return chunk && compress(bytesOf(chunk), level);
  });
  return assembleStored(g, chunks);
}

/**
 * How a chunk's zstd frame is laid out. `sized`: written by one zstd call that knows the chunk's
 * size, which the frame header then states. `streamed`: the frame a zstd stream writes
 * (`encodeShard`), which states no size. Both decode to the same values; a store's bytes stay
 * what they were only where each keeps the frames it was written with.
 */
export type ZstdFraming = 'sized' | 'streamed';

/**
 * `encodeShard` on the calling thread, for a worker thread that owns the buffer: one zstd call a
 * chunk costs about a quarter less CPU than a stream on libuv's threads (512 KiB uint16 chunks
 * of predicted markers, 290 against 390 µs), and nothing lands on the main thread's event loop.
 * The inner chunks `knownFill` (indices) are the caller's to vouch for: left out, never read, so
 * their part of the buffer need not have been set. With `framing` `streamed`, the bytes are
 * `encodeShard`'s. `afterChunk(k)` runs once inner chunk `k` (not left out, not wholly past
 * `extent`) is in the buffer as stored, padded, and encoded: work on the chunk there finds it
 * still in cache.
 */
export function encodeShardSync(
  g: ShardGeometry,
  data: TypedArray,
  extent: ShardExtent,
  level: number,
  knownFill: readonly number[] = [],
  framing: ZstdFraming = 'sized',
  afterChunk?: (k: number) => void,
): Uint8Array | undefined {
  const leftOut = new Set(knownFill);
  const chunks = Array.from({ length: chunkCount(g) }, (_, k) => {
    if (leftOut.has(k) || !chunkInside(g, extent, k)) return undefined;
    const chunk = chunkToStore(g, data, extent, k);
    const pieces = chunk && compressChunk(bytesOf(chunk), level, framing);
    afterChunk?.(k);
    return pieces;
  });
  return assembleStored(g, chunks);
}

function compressChunk(bytes: Uint8Array, level: number, framing: ZstdFraming): Uint8Array[] {
  return framing === 'sized'
    ? [zstdCompressSync(bytes, compressOptions(bytes, level))]
    : compressAsStreamed(bytes, level);
}

/** Whether inner chunk `k` holds any pixel inside `extent`. */
export function chunkInside(g: ShardGeometry, extent: ShardExtent, k: number): boolean {
  return (
    Math.floor(k / g.chunksX) * g.chunkHeight < extent.height && (k % g.chunksX) * g.chunkWidth < extent.width
  );
}

/**
 * Inner chunk `k` as it is stored, its part past `extent` padded; `undefined` when it lies
 * wholly past the extent or holds only the fill value (left out). The fill check comes before
 * the compression: it stops at a chunk's first other value, so a chunk of data costs nothing,
 * and a chunk of fill a scan instead of a compression (5 against 90 µs for 512 KiB).
 */
function chunkToStore(
  g: ShardGeometry,
  data: TypedArray,
  extent: ShardExtent,
  k: number,
): TypedArray | undefined {
  if (!chunkInside(g, extent, k)) return undefined;
  const validY = Math.min(g.chunkHeight, extent.height - Math.floor(k / g.chunksX) * g.chunkHeight);
  const validX = Math.min(g.chunkWidth, extent.width - (k % g.chunksX) * g.chunkWidth);
  const chunk = data.subarray(k * g.chunkLength, (k + 1) * g.chunkLength);
  if (validY < g.chunkHeight || validX < g.chunkWidth) padChunk(g, chunk, validY, validX);
  return holdsOnly(chunk, g.fillValue) ? undefined : chunk;
}

function assembleStored(
  g: ShardGeometry,
  chunks: ReadonlyArray<Uint8Array[] | undefined>,
): Uint8Array | undefined {
  return chunks.every((pieces) => pieces === undefined) ? undefined : assemble(g, chunks);
}

/**
 * At the fast levels, the window and hash table zstd itself picks at level 1 for inputs of up
 * to 128 KiB: a 512 KiB chunk then compresses to the same size within 0.1 %, with a fifth less
 * CPU for predicted markers and a seventh less for H&E (2,000 chunks of each from
 * bench/inference's slide).
 */
const SMALL_TABLES = { [constants.ZSTD_c_windowLog]: 17, [constants.ZSTD_c_hashLog]: 12 };

/**
 * An output buffer that fits the worst case (ZSTD_compressBound) keeps a frame to one or two
 * pieces (the data, then the frame end) and lets zstd compress in one pass: with a smaller one
 * it buffers the whole chunk in a context of its own, and a shard's encode held several times
 * the memory (bench/segmentation).
 */
function compressOptions(bytes: Uint8Array, level: number): ZstdOptions {
  return {
    chunkSize: bytes.byteLength + (bytes.byteLength >> 7) + 1024,
    params: { [constants.ZSTD_c_compressionLevel]: level, ...(level <= 1 ? SMALL_TABLES : {}) },
  };
}

/**
 * A zstd frame in the pieces the compressor emitted. `zstdCompress` would concatenate them, a
 * copy of every byte on the main thread that `assemble` makes anyway.
 */
function compress(bytes: Uint8Array, level: number): Promise<Uint8Array[]> {
  const stream = new ZstdCompress(compressOptions(bytes, level));
  const parts: Uint8Array[] = [];
  return new Promise((resolve, reject) => {
    stream.on('data', (part: Uint8Array) => parts.push(part));
    stream.on('error', reject);
    stream.on('end', () => resolve(parts));
    stream.end(bytes);
  });
}

/**
 * The frame `compress` writes, in one call on the calling thread, without a stream's objects and
 * its hop to libuv's threads. A zstd stream compresses each block as it fills and what is left
 * when it ends: one call with `ZSTD_e_flush` compresses the same blocks, none marked last, and
 * leaves the frame open. It is
 * closed here as the stream closes it: by an empty last block after a whole number of blocks,
 * else by marking the last block last (RFC 8878 3.1.1.2). Every window here holds a whole block
 * (the smallest, at the fast levels, is 128 KiB), so blocks are zstd's largest.
 */
function compressAsStreamed(bytes: Uint8Array, level: number): Uint8Array[] {
  const open = zstdCompressSync(bytes, {
    ...compressOptions(bytes, level),
    finishFlush: constants.ZSTD_e_flush,
  });
  if (bytes.byteLength % ZSTD_BLOCK_BYTES === 0) return [open, EMPTY_LAST_BLOCK];
  open[lastBlockHeader(open)]! |= 1;
  return [open];
}

const ZSTD_BLOCK_BYTES = 128 * 1024;
/** A block header (3 bytes, little-endian): last, raw, 0 bytes. */
const EMPTY_LAST_BLOCK = Uint8Array.of(1, 0, 0);

/** Where the last block's header starts in a zstd frame with no checksum (RFC 8878 3.1.1). */
function lastBlockHeader(frame: Uint8Array): number {
  const descriptor = frame[4]!;
  const singleSegment = (descriptor >> 5) & 1;
  const sizeBytes = [singleSegment, 2, 4, 8][descriptor >> 6]!;
  const dictionaryBytes = [0, 1, 2, 4][descriptor & 3]!;
  let at = 5 + (1 - singleSegment) + dictionaryBytes + sizeBytes;
  let last = -1;
  while (at < frame.byteLength) {
    const header = frame[at]! | (frame[at + 1]! << 8) | (frame[at + 2]! << 16);
    const type = (header >> 1) & 3;
    last = at;
    // An RLE block (type 1) holds one byte, repeated as many times as its size says.
    at += 3 + (type === 1 ? 1 : header >>> 3);
  }
  if (last < 0 || at !== frame.byteLength) throw new Error('a zstd frame that does not end on a block');
  return last;
}

/** Sets the elements of `chunk` past `validY` rows or `validX` columns to the fill value. */
function padChunk(g: ShardGeometry, chunk: TypedArray, validY: number, validX: number): void {
  const plane = g.chunkHeight * g.chunkWidth;
  for (let c = 0; c < g.channels; c++) {
    const base = c * plane;
    if (validX < g.chunkWidth) {
      for (let y = 0; y < validY; y++) {
        const row = base + y * g.chunkWidth;
        chunk.fill(g.fillValue, row + validX, row + g.chunkWidth);
      }
    }
    chunk.fill(g.fillValue, base + validY * g.chunkWidth, base + plane);
  }
}

/**
 * Whether every element is `value`: the first one is, and each element's bytes equal the next
 * one's, in one native comparison of the chunk with itself shifted by an element (a loop over a
 * 512 KiB chunk's elements cost a prediction 0.4 ms a tile). A -0 among zeros counts as a
 * different value; the chunk is then stored, which is still exact.
 */
function holdsOnly(chunk: TypedArray, value: number): boolean {
  if (Number.isNaN(value)) {
    for (let i = 0; i < chunk.length; i++) if (!Number.isNaN(chunk[i])) return false;
    return true;
  }
  if (chunk.length === 0) return true;
  if (chunk[0] !== value) return false;
  const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  const step = chunk.BYTES_PER_ELEMENT;
  return bytes.subarray(0, bytes.length - step).equals(bytes.subarray(step));
}

/** A shard holding no chunk: its index alone, every entry missing, so it reads as the fill value. */
export function emptyShard(g: ShardGeometry): Uint8Array {
  return assemble(g, new Array<undefined>(chunkCount(g)).fill(undefined));
}

function assemble(g: ShardGeometry, chunks: ReadonlyArray<Uint8Array[] | undefined>): Uint8Array {
  const sizes = chunks.map((pieces) => pieces?.reduce((n, piece) => n + piece.byteLength, 0));
  const payload = sizes.reduce((n: number, size) => n + (size ?? 0), 0);
  const out = new Uint8Array(payload + indexBytes(g));
  const index = new DataView(out.buffer, payload, chunkCount(g) * ENTRY_BYTES);
  let offset = 0;
  chunks.forEach((pieces, k) => {
    const entry = k * ENTRY_BYTES;
    if (pieces === undefined) {
      index.setBigUint64(entry, MISSING, true);
      index.setBigUint64(entry + 8, MISSING, true);
      return;
    }
    index.setBigUint64(entry, BigInt(offset), true);
    index.setBigUint64(entry + 8, BigInt(sizes[k]!), true);
    for (const piece of pieces) {
      out.set(piece, offset);
      offset += piece.byteLength;
    }
  });
  const indexView = out.subarray(payload, payload + chunkCount(g) * ENTRY_BYTES);
  new DataView(out.buffer).setUint32(out.byteLength - CRC_BYTES, crc32c(indexView), true);
  return out;
}

/** Reads and checks the index at the end of an encoded shard. */
export function parseShardIndex(g: ShardGeometry, shard: Uint8Array): ShardIndex {
  const size = indexBytes(g);
  if (shard.byteLength < size) {
    throw new ComputeError('CorruptZarr', `shard of ${shard.byteLength} bytes is shorter than its index`);
  }
  return parseIndexBytes(g, shard.subarray(shard.byteLength - size), shard.byteLength - size);
}

/**
 * Reads and checks a shard's index from its last `indexBytes(g)` bytes. `payload`, the bytes
 * before the index, bounds the chunks where it is known; a ranged read of the index alone does
 * not know it, and a chunk past the end then shows as a short read of the chunk.
 */
export function parseIndexBytes(
  g: ShardGeometry,
  tail: Uint8Array,
  payload = Number.POSITIVE_INFINITY,
): ShardIndex {
  if (tail.byteLength !== indexBytes(g)) {
    throw new ComputeError('CorruptZarr', `shard index of ${tail.byteLength} bytes, not ${indexBytes(g)}`);
  }
  const entries = tail.subarray(0, tail.byteLength - CRC_BYTES);
  const view = new DataView(tail.buffer, tail.byteOffset, tail.byteLength);
  if (view.getUint32(tail.byteLength - CRC_BYTES, true) !== crc32c(entries)) {
    throw new ComputeError('CorruptZarr', 'shard index checksum does not match');
  }
  return Array.from({ length: chunkCount(g) }, (_, k) => {
    const offset = view.getBigUint64(k * ENTRY_BYTES, true);
    const nbytes = view.getBigUint64(k * ENTRY_BYTES + 8, true);
    if (offset === MISSING && nbytes === MISSING) return undefined;
    if (offset + nbytes > BigInt(Math.min(payload, Number.MAX_SAFE_INTEGER))) {
      throw new ComputeError('CorruptZarr', `shard chunk ${k} lies outside the shard`);
    }
    return { offset: Number(offset), size: Number(nbytes) };
  });
}

/** Decodes inner chunk `k` of `shard` into `into` (one chunk's elements); a missing one is fill. */
export async function decodeChunk(
  g: ShardGeometry,
  shard: Uint8Array,
  index: ShardIndex,
  k: number,
  into: TypedArray,
): Promise<void> {
  const entry = index[k];
  if (entry === undefined) {
    into.fill(g.fillValue);
    return;
  }
  const target = bytesOf(into);
  target.set(await decompressChunk(shard, entry, k, target.byteLength));
}

/** Inner chunk `k` decoded from its stored bytes alone (a ranged read of the shard). */
export async function decodeStoredChunk<D extends DataType>(
  g: ShardGeometry & { dataType: D },
  stored: Uint8Array,
  k: number,
): Promise<TypedArray<D>> {
  const expected = g.chunkLength * elementBytes(g.dataType);
  return viewOf(
    g.dataType,
    await decompressChunk(stored, { offset: 0, size: stored.byteLength }, k, expected),
  );
}

/** The bytes of stored inner chunk `k`, which must decode to `expected` bytes. */
async function decompressChunk(
  shard: Uint8Array,
  entry: { offset: number; size: number },
  k: number,
  expected: number,
): Promise<Uint8Array> {
  let bytes: Uint8Array;
  try {
    bytes = await decompress(shard.subarray(entry.offset, entry.offset + entry.size), {
      // Room to spare: an output buffer that fills exactly makes zlib allocate a second one.
      chunkSize: expected + 64,
      maxOutputLength: expected,
    });
  } catch (err) {
    throw new ComputeError('CorruptZarr', `shard chunk ${k} does not decompress`, { cause: err });
  }
  if (bytes.byteLength !== expected) {
    throw new ComputeError(
      'CorruptZarr',
      `shard chunk ${k} decodes to ${bytes.byteLength} bytes, not ${expected}`,
    );
  }
  return bytes;
}

/**
 * Calls `visit(k, chunk)` with each stored inner chunk of an encoded shard as it is decoded, in
 * no set order; chunks left out (only the fill value) are not visited. For a reader that uses
 * each chunk once: no shard-sized buffer, and no copy of the decoded bytes.
 */
export async function forEachStoredChunk<D extends DataType>(
  g: ShardGeometry & { dataType: D },
  shard: Uint8Array,
  visit: (k: number, chunk: TypedArray<D>) => void,
): Promise<void> {
  const index = parseShardIndex(g, shard);
  await mapLimited(index.length, async (k) => {
    const entry = index[k];
    if (entry !== undefined)
      visit(k, await decodeStoredChunk(g, shard.subarray(entry.offset, entry.offset + entry.size), k));
  });
}

/** Decodes a whole encoded shard into a chunk-major buffer (`undefined`: the shard is missing). */
export async function decodeShard(
  g: ShardGeometry,
  shard: Uint8Array | undefined,
  into: TypedArray,
): Promise<void> {
  if (shard === undefined) {
    into.fill(g.fillValue);
    return;
  }
  const index = parseShardIndex(g, shard);
  await mapLimited(index.length, (k) =>
    decodeChunk(g, shard, index, k, into.subarray(k * g.chunkLength, (k + 1) * g.chunkLength)),
  );
}

/** `task(0) .. task(count - 1)`, at most `CHUNK_CODEC_CONCURRENCY` at once; answers in order. */
async function mapLimited<T>(count: number, task: (k: number) => Promise<T> | T): Promise<T[]> {
  const results = new Array<T>(count);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const k = next++;
      try {
        results[k] = await task(k);
      } catch (err) {
        // The answer is a failure now: start no more chunks.
        next = count;
        throw err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(CHUNK_CODEC_CONCURRENCY, count) }, worker));
  return results;
}
