import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { RangeQuery, StoreOptions } from '../../../compute/store';
import {
  type ArraySpec,
  crc32c,
  type DataType,
  encodeShardSync,
  folderStore,
  type KeyValueStore,
  memoryStore,
  openArray,
  RegionReader,
  readMaskArray,
  type ShardEncoder,
  ShardedArray,
  type TypedArray,
  writeMaskArray,
} from '../../../compute/zarr';
import { encodeShard } from '../../../compute/zarr/shard';
import { runPythonJson } from '../../support/python';
import { readWithZarrita } from '../../support/zarrita';

function spec<D extends DataType>(dataType: D, overrides: Partial<ArraySpec<D>> = {}): ArraySpec<D> {
  return {
    dataType,
    shape: [2, 70, 45],
    shardShape: [32, 32],
    chunkShape: [8, 16],
    fillValue: 0,
    dimensionNames: ['c', 'y', 'x'],
    compressionLevel: 1,
    ...overrides,
  };
}

/** A value per element from its coordinates, so a misplaced element shows. */
function valueAt(c: number, y: number, x: number): number {
  return (c * 97 + y * 31 + x * 7) % 251;
}

/** Writes every shard of `array` from `valueAt`, going through chunk-major buffers. */
async function fill<D extends DataType>(
  array: ShardedArray<D>,
  sink: ReturnType<typeof memoryStore> | ReturnType<typeof folderStore>,
  value: (c: number, y: number, x: number) => number = valueAt,
  encode?: ShardEncoder,
): Promise<void> {
  await array.writeMetadata(sink);
  const g = array.geometry;
  const [shardHeight, shardWidth] = array.spec.shardShape;
  for (let sy = 0; sy < array.shardsY; sy++) {
    for (let sx = 0; sx < array.shardsX; sx++) {
      const data = array.allocateShard();
      for (let k = 0; k < g.chunksY * g.chunksX; k++) {
        const top = sy * shardHeight + Math.floor(k / g.chunksX) * g.chunkHeight;
        const left = sx * shardWidth + (k % g.chunksX) * g.chunkWidth;
        for (let c = 0; c < g.channels; c++) {
          for (let y = 0; y < g.chunkHeight; y++) {
            for (let x = 0; x < g.chunkWidth; x++) {
              data[k * g.chunkLength + (c * g.chunkHeight + y) * g.chunkWidth + x] = value(
                c,
                top + y,
                left + x,
              );
            }
          }
        }
      }
      await array.writeShard(sink, sy, sx, data, undefined, encode);
    }
  }
}

function expected(shape: readonly number[], region: { y: number; x: number; height: number; width: number }) {
  const out: number[] = [];
  for (let c = 0; c < shape[0]!; c++) {
    for (let y = region.y; y < region.y + region.height; y++) {
      for (let x = region.x; x < region.x + region.width; x++) out.push(valueAt(c, y, x));
    }
  }
  return out;
}

describe('crc32c', () => {
  it('matches the Castagnoli check value', () => {
    expect(crc32c(new TextEncoder().encode('123456789'))).toBe(0xe3069283);
    expect(crc32c(new Uint8Array(0))).toBe(0);
  });
});

describe('ShardedArray', () => {
  it('reads back what it wrote, across shard and chunk edges', async () => {
    const sink = memoryStore();
    const array = new ShardedArray('a', spec('uint8'));
    await fill(array, sink);
    expect([...sink.map.keys()].sort()).toEqual([
      'a/c/0/0/0',
      'a/c/0/0/1',
      'a/c/0/1/0',
      'a/c/0/1/1',
      'a/c/0/2/0',
      'a/c/0/2/1',
      'a/zarr.json',
    ]);
    const whole = { y: 0, x: 0, height: 70, width: 45 };
    expect([...(await array.readRegion(sink, whole))]).toEqual(expected([2, 70, 45], whole));
    const inner = { y: 13, x: 29, height: 40, width: 9 };
    expect([...(await array.readRegion(sink, inner))]).toEqual(expected([2, 70, 45], inner));
  });

  it('stores an index-only shard for each key left out, and only for those', async () => {
    const sink = memoryStore();
    // 7 x 7 shards: more keys than one round of lookups.
    const array = new ShardedArray('m', spec('uint16', { shape: [1, 200, 200] }));
    const shard = array.allocateShard().fill(3);
    const written = new Set<string>();
    for (let y = 0; y < 7; y++)
      for (let x = 0; x < 7; x++)
        if ((y * 7 + x) % 3 === 0) {
          await array.writeShard(sink, y, x, shard);
          written.add(array.shardKey(y, x));
        }
    const before = new Map(sink.map);
    expect(await array.storeMissingShards(sink)).toBe(49 - written.size);
    for (let y = 0; y < 7; y++) {
      for (let x = 0; x < 7; x++) {
        const key = array.shardKey(y, x);
        if (written.has(key)) expect(sink.map.get(key)).toBe(before.get(key));
        else expect(sink.map.get(key)!.byteLength).toBeLessThan(200);
        const read = array.allocateShard();
        await array.readShard(sink, y, x, read);
        // The shard's first pixel lies inside the array, at every edge too.
        expect(read[0]).toBe(written.has(key) ? 3 : 0);
        if (!written.has(key)) expect(read.every((v) => v === 0)).toBe(true);
      }
    }
    expect(await array.storeMissingShards(sink)).toBe(0);
    // Of some shards only.
    const some = memoryStore();
    expect(await array.storeMissingShards(some, undefined, [{ y: 6, x: 0 }])).toBe(1);
    expect([...some.map.keys()]).toEqual([array.shardKey(6, 0)]);
  });

  it('leaves a background shard out, or stores it index-only', async () => {
    const background = new ShardedArray('m', spec('uint16')).allocateShard();
    for (const emptyShards of ['omit', 'index-only'] as const) {
      const sink = memoryStore();
      const array = new ShardedArray('m', spec('uint16'), emptyShards);
      expect(await array.writeShard(sink, 1, 0, background)).toBe(false);
      const stored = sink.map.get(array.shardKey(1, 0));
      if (emptyShards === 'omit') expect(stored).toBeUndefined();
      else {
        const missing = memoryStore();
        await array.storeMissingShards(missing, undefined, [{ y: 1, x: 0 }]);
        expect(stored).toEqual(missing.map.get(array.shardKey(1, 0)));
      }
    }
  });

  it('keeps float32 and uint32 values exactly', async () => {
    for (const dataType of ['float32', 'uint32'] as const) {
      const sink = memoryStore();
      const array = new ShardedArray(
        '',
        spec(dataType, { fillValue: dataType === 'float32' ? Number.NaN : 0 }),
      );
      await fill(array, sink, (c, y, x) =>
        dataType === 'float32' ? valueAt(c, y, x) / 7 : valueAt(c, y, x) * 1e6,
      );
      const opened = await openArray(sink, '');
      expect(opened.spec).toEqual(array.spec);
      const read = (await opened.readRegion(sink, { y: 30, x: 10, height: 5, width: 30 })) as TypedArray;
      expect(read).toBeInstanceOf(dataType === 'float32' ? Float32Array : Uint32Array);
      const want = expected([2, 70, 45], { y: 30, x: 10, height: 5, width: 30 }).map((v) =>
        dataType === 'float32' ? Math.fround(v / 7) : v * 1e6,
      );
      expect([...read]).toEqual(want);
    }
  });

  it('leaves out chunks and shards that hold only the fill value, and pads edge chunks with it', async () => {
    const sink = memoryStore();
    const array = new ShardedArray('m', spec('uint8', { fillValue: 9 }));
    // Only rows 40..47 hold data: shard row 1, one chunk row of it.
    await fill(array, sink, (c, y, x) => (y >= 40 && y < 48 ? 1 + ((c + x) % 5) : 9));
    expect([...sink.map.keys()].filter((k) => k.includes('/c/')).sort()).toEqual(['m/c/0/1/0', 'm/c/0/1/1']);
    const shard = sink.map.get('m/c/0/1/1')!;
    // 4 x 2 chunks per shard; the edge shard's last chunk column lies wholly outside the array.
    const index = new DataView(shard.buffer, shard.byteOffset + shard.byteLength - 8 * 16 - 4, 8 * 16);
    const missing = 0xffff_ffff_ffff_ffffn;
    const entries = Array.from({ length: 8 }, (_, k) => index.getBigUint64(k * 16, true) !== missing);
    expect(entries).toEqual([false, false, true, false, false, false, false, false]);
    const decoded = array.allocateShard();
    await array.readShard(sink, 1, 1, decoded);
    // Chunk 2, channel 0, row 0: columns 32..44 are data, 45..47 the fill value (padding).
    const row = [...decoded.subarray(2 * 256, 2 * 256 + 16)];
    expect(row.slice(13)).toEqual([9, 9, 9]);
    expect(row.slice(0, 13)).toEqual(Array.from({ length: 13 }, (_, x) => 1 + ((32 + x) % 5)));
    // Chunk by chunk: only the stored one is visited, with the elements `readShard` gives.
    const visited: number[] = [];
    await array.forEachChunk(sink, 1, 1, (k, chunk) => {
      visited.push(k);
      expect([...chunk]).toEqual([...decoded.subarray(k * 256, (k + 1) * 256)]);
    });
    expect(visited).toEqual([2]);
    await array.forEachChunk(sink, 0, 0, () => visited.push(-1));
    expect(visited).toEqual([2]);
  });

  it('stores a chunk whose one differing element is its first or its last', async () => {
    for (const dataType of ['uint8', 'uint16', 'float32'] as const) {
      const sink = memoryStore();
      const array = new ShardedArray('m', spec(dataType, { fillValue: 9 }));
      // Chunk (0, 0) of shard (0, 0) differs in its first element; the last chunk of shard
      // (2, 1), rows 64..69 and columns 32..44 inside the array, in its last element inside it.
      const odd = (c: number, y: number, x: number) =>
        (c === 0 && y === 0 && x === 0) || (c === 1 && y === 69 && x === 44);
      await fill(array, sink, (c, y, x) => (odd(c, y, x) ? 10 : 9));
      expect([...sink.map.keys()].filter((k) => k.includes('/c/')).sort()).toEqual([
        'm/c/0/0/0',
        'm/c/0/2/1',
      ]);
      const read = await array.readRegion(sink, { y: 0, x: 0, height: 70, width: 45 });
      expect(read[0]).toBe(10);
      expect(read[2 * 70 * 45 - 1]).toBe(10);
      expect([...read].filter((v) => v !== 9).length).toBe(2);
    }
  });

  it('encodes the same shards on the calling thread (encodeShardSync) as on libuv threads', async () => {
    const sync: ShardEncoder = async (g, data, extent, level) => encodeShardSync(g, data, extent, level);
    for (const dataType of ['uint8', 'uint16'] as const) {
      const value = (c: number, y: number, x: number) => (y >= 40 && y < 48 ? 1 + ((c + x) % 5) : 9);
      const byStream = memoryStore();
      const bySync = memoryStore();
      const array = new ShardedArray('m', spec(dataType, { fillValue: 9 }));
      await fill(array, byStream, value);
      await fill(array, bySync, value, sync);
      expect([...bySync.map.keys()].sort()).toEqual([...byStream.map.keys()].sort());
      expect(bySync.map.size).toBeGreaterThan(1);
      for (const key of byStream.map.keys()) {
        if (key.endsWith('zarr.json')) continue;
        const [sy, sx] = key.split('/').slice(-2).map(Number) as [number, number];
        const a = array.allocateShard();
        const b = array.allocateShard();
        await array.readShard(byStream, sy, sx, a);
        await array.readShard(bySync, sy, sx, b);
        expect([...b]).toEqual([...a]);
      }
      const whole = { y: 0, x: 0, height: 70, width: 45 };
      const read = await array.readRegion(bySync, whole);
      expect([...read].filter((v) => v !== 9).length).toBe(2 * 8 * 45);
    }
  });

  it("writes encodeShard's streamed frames on the calling thread, byte for byte (framing streamed)", async () => {
    let seed = 11;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return Math.floor((seed / 2 ** 31) * 65_536);
    };
    const contents: [string, (i: number, n: number) => number][] = [
      ['noise', () => random()],
      ['smooth', (i) => 3000 + Math.round(2000 * Math.sin(i / 300)) + (random() % 20)],
      // Whole blocks of one value: zstd writes RLE blocks.
      ['one value', () => 1234],
      ['periodic', (i) => i % 97],
      ['fill, then noise', (i, n) => (i < n / 2 ? 0 : random() % 300)],
    ];
    // Chunks of whole 128 KiB zstd blocks (one, four), of less than one, and of blocks and a rest.
    const chunks: [DataType, number, number][] = [
      ['uint16', 512, 512],
      ['uint16', 256, 256],
      ['uint16', 300, 200],
      ['uint16', 512, 300],
      ['uint8', 512, 512],
      ['uint8', 100, 70],
    ];
    let compared = 0;
    // A shard of two chunks side by side.
    const twoChunks = (dataType: DataType, chunkHeight: number, chunkWidth: number) => ({
      dataType,
      fillValue: 0,
      channels: 1,
      chunkHeight,
      chunkWidth,
      chunksY: 1,
      chunksX: 2,
      chunkLength: chunkHeight * chunkWidth,
    });
    for (const [dataType, chunkHeight, chunkWidth] of chunks) {
      const g = twoChunks(dataType, chunkHeight, chunkWidth);
      const extent = { height: chunkHeight, width: 2 * chunkWidth };
      for (const [name, value] of contents) {
        const n = 2 * g.chunkLength;
        const data = dataType === 'uint8' ? new Uint8Array(n) : new Uint16Array(n);
        for (let i = 0; i < n; i++) data[i] = value(i, n) % (dataType === 'uint8' ? 256 : 65_536);
        for (const level of [-2, 1, 3]) {
          const streamed = await encodeShard(g, data.slice(), extent, level);
          const sync = encodeShardSync(g, data.slice(), extent, level, [], 'streamed');
          expect({
            chunk: [dataType, chunkHeight, chunkWidth],
            name,
            level,
            same: Buffer.compare(sync!, streamed!),
          }).toEqual({ chunk: [dataType, chunkHeight, chunkWidth], name, level, same: 0 });
          compared++;
        }
      }
    }
    expect(compared).toBe(90);
    // The sized frames are another layout: they state each chunk's size.
    const data = new Uint16Array(2 * 512 * 512).map((_, i) => i % 97);
    const g = twoChunks('uint16', 512, 512);
    const extent = { height: 512, width: 1024 };
    expect(
      Buffer.compare(encodeShardSync(g, data, extent, 1)!, (await encodeShard(g, data, extent, 1))!),
    ).not.toBe(0);
  });

  it('leaves out the chunks the caller vouches hold the fill value (knownFill) without reading them', async () => {
    const array = new ShardedArray('k', spec('uint16', { fillValue: 9 }));
    const g = array.geometry;
    const extent = { height: 32, width: 32 };
    const data = array.allocateShard().map((_, i) => 100 + (i % 7));
    const whole = encodeShardSync(g, data, extent, 1)!;
    // Chunks 1 and 5 hold what an earlier shard left there; listed, they read as the fill value.
    const vouched = encodeShardSync(g, data, extent, 1, [1, 5])!;
    const sink = memoryStore();
    await sink.put('whole', whole);
    await sink.put('vouched', vouched);
    const read = async (key: string) => {
      const out = array.allocateShard();
      await array.readShard({ ...sink, get: (_, options) => sink.get(key, options) }, 0, 0, out);
      return out;
    };
    const [a, b] = [await read('whole'), await read('vouched')];
    for (let k = 0; k < g.chunksY * g.chunksX; k++) {
      const chunk = (v: TypedArray) => [...v.subarray(k * g.chunkLength, (k + 1) * g.chunkLength)];
      expect(chunk(b)).toEqual(k === 1 || k === 5 ? new Array(g.chunkLength).fill(9) : chunk(a));
    }
    expect(vouched.byteLength).toBeLessThan(whole.byteLength);
    expect(
      encodeShardSync(
        g,
        data,
        extent,
        1,
        Array.from({ length: g.chunksY * g.chunksX }, (_, k) => k),
      ),
    ).toBe(undefined);
  });

  it('compresses at the fast levels with the 128 KiB window zstd picks for small inputs', async () => {
    const g = { ...new ShardedArray('w', spec('uint16')).geometry, chunkHeight: 512, chunkWidth: 512 };
    const chunk = { ...g, chunksY: 1, chunksX: 1, chunkLength: 512 * 512 };
    const data = new Uint16Array(512 * 512).map((_, i) => (i * 7919) % 65_536);
    // A frame header (RFC 8878 3.1.1.1): magic, descriptor, then, unless the frame is a single
    // segment (its window the whole content), the window descriptor: its top five bits are the
    // window's log2 less 10.
    const windowLog = (frame: Uint8Array) => ((frame[4]! >> 5) & 1 ? 'whole' : 10 + (frame[5]! >> 3));
    const extent = { height: 512, width: 512 };
    expect(windowLog(encodeShardSync(chunk, data, extent, 1)!)).toBe(17);
    expect(windowLog(encodeShardSync(chunk, data, extent, -3)!)).toBe(17);
    expect(windowLog(encodeShardSync(chunk, data, extent, 3)!)).toBe('whole');
    const sink = memoryStore();
    const array = new ShardedArray('w', {
      ...spec('uint16'),
      shape: [1, 512, 512],
      shardShape: [512, 512],
      chunkShape: [512, 512],
    });
    await array.writeShard(sink, 0, 0, data);
    expect(windowLog(sink.map.get('w/c/0/0/0')!)).toBe(17);
  });

  it('refuses a shard whose index checksum or chunk is damaged', async () => {
    const sink = memoryStore();
    const array = new ShardedArray('d', spec('uint8'));
    await fill(array, sink);
    const into = array.allocateShard();
    const shard = sink.map.get('d/c/0/0/0')!;
    const badIndex = shard.slice();
    badIndex[badIndex.byteLength - 10] = badIndex[badIndex.byteLength - 10]! ^ 1;
    await sink.put('d/c/0/0/0', badIndex);
    await expect(array.readShard(sink, 0, 0, into)).rejects.toMatchObject({ _tag: 'CorruptZarr' });
    const badChunk = shard.slice();
    badChunk[2] = badChunk[2]! ^ 0xff;
    await sink.put('d/c/0/0/0', badChunk);
    await expect(array.readShard(sink, 0, 0, into)).rejects.toMatchObject({ _tag: 'CorruptZarr' });
  });

  it('refuses shapes where shards are not a multiple of chunks', () => {
    expect(() => new ShardedArray('x', spec('uint8', { shardShape: [32, 30] }))).toThrow(RangeError);
  });
});

/** Counts a store's whole-object gets and ranged reads, per key. */
function countingSink(sink: KeyValueStore) {
  const gets: string[] = [];
  const ranges: string[] = [];
  return {
    gets,
    ranges,
    get: (key: string, options?: StoreOptions) => {
      gets.push(key);
      return sink.get(key, options);
    },
    getRange: (key: string, range: RangeQuery, options?: StoreOptions) => {
      ranges.push(`${key} ${'suffixLength' in range ? `-${range.suffixLength}` : range.offset}`);
      return sink.getRange(key, range, options);
    },
    put: (key: string, bytes: Uint8Array, options?: StoreOptions) => sink.put(key, bytes, options),
  } satisfies KeyValueStore & { gets: string[]; ranges: string[] };
}

describe('KeyValueStore.getRange', () => {
  it('reads a span, the last bytes, or what the object holds of a span past its end', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sps-range-'));
    try {
      const bytes = Uint8Array.from({ length: 100 }, (_, i) => i);
      for (const sink of [memoryStore(), folderStore(dir)]) {
        await sink.put('a/b', bytes);
        expect([...(await sink.getRange('a/b', { offset: 10, length: 3 }))!]).toEqual([10, 11, 12]);
        expect([...(await sink.getRange('a/b', { suffixLength: 2 }))!]).toEqual([98, 99]);
        expect([...(await sink.getRange('a/b', { offset: 98, length: 10 }))!]).toEqual([98, 99]);
        expect((await sink.getRange('a/b', { offset: 200, length: 1 }))!.byteLength).toBe(0);
        expect((await sink.getRange('a/b', { suffixLength: 500 }))!.byteLength).toBe(100);
        expect(await sink.getRange('a/none', { offset: 0, length: 1 })).toBeUndefined();
        await expect(sink.getRange('a/b', { offset: -1, length: 1 })).rejects.toThrow(RangeError);
        await expect(sink.getRange('a/b', { suffixLength: 0 })).rejects.toThrow(RangeError);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('RegionReader', () => {
  const whole = { y: 0, x: 0, height: 70, width: 45 };

  it('reads the pixels ShardedArray.readRegion reads, through ranged reads of indexes and chunks', async () => {
    const stored = memoryStore();
    const array = new ShardedArray('r', spec('uint16', { fillValue: 9 }));
    // Rows 32..63 (shard row 1) hold only the fill value: that shard row is never stored.
    await fill(array, stored, (c, y, x) => (y >= 32 && y < 64 ? 9 : valueAt(c, y, x)));
    expect(stored.map.has('r/c/0/1/0')).toBe(false);
    const sink = countingSink(stored);
    const reader = new RegionReader(array, sink, 1 << 20);
    for (const region of [
      whole,
      { y: 13, x: 29, height: 40, width: 9 },
      { y: 60, x: 44, height: 10, width: 1 },
    ]) {
      expect([...(await reader.readRegion(region))]).toEqual([...(await array.readRegion(stored, region))]);
    }
    expect(sink.gets).toEqual([]);
    // Each shard's index once (a missing shard's too), each stored chunk once: 2 x 3 chunks a
    // shard, 2 shards of the last row past the array's 70 rows.
    const indexes = sink.ranges.filter((r) => r.includes(' -'));
    expect(indexes.sort()).toEqual(
      ['r/c/0/0/0', 'r/c/0/0/1', 'r/c/0/1/0', 'r/c/0/1/1', 'r/c/0/2/0', 'r/c/0/2/1'].map(
        (k) => `${k} -${8 * 16 + 4}`,
      ),
    );
    expect(new Set(sink.ranges).size).toBe(sink.ranges.length);
    const read = sink.ranges.length;
    await reader.readRegion({ y: 20, x: 10, height: 30, width: 30 });
    expect(sink.ranges.length).toBe(read);
  });

  it('fetches again what it could not keep, and the same pixels', async () => {
    const stored = memoryStore();
    const array = new ShardedArray('r', spec('uint8'));
    await fill(array, stored);
    const sink = countingSink(stored);
    const reader = new RegionReader(array, sink, 0);
    expect([...(await reader.readRegion(whole))]).toEqual(expected([2, 70, 45], whole));
    const first = sink.ranges.length;
    expect([...(await reader.readRegion(whole))]).toEqual(expected([2, 70, 45], whole));
    expect(sink.ranges.length).toBe(2 * first - 6);
  });

  it('refuses a damaged index, a chunk past the shard or one that does not decode, and keeps no failure', async () => {
    const stored = memoryStore();
    const array = new ShardedArray('d', spec('uint8'));
    await fill(array, stored);
    const shard = stored.map.get('d/c/0/0/0')!;
    const region = { y: 0, x: 0, height: 8, width: 16 };
    const damaged = (change: (bytes: Uint8Array) => Uint8Array) => {
      stored.map.set('d/c/0/0/0', change(shard.slice()));
      return new RegionReader(array, stored, 1 << 20).readRegion(region);
    };
    await expect(
      damaged((b) => {
        b[b.byteLength - 10] = b[b.byteLength - 10]! ^ 1;
        return b;
      }),
    ).rejects.toMatchObject({ _tag: 'CorruptZarr' });
    await expect(
      damaged((b) => {
        b[2] = b[2]! ^ 0xff;
        return b;
      }),
    ).rejects.toMatchObject({ _tag: 'CorruptZarr' });
    // The payload cut short, the index kept: chunk 0 now runs past the end of the shard.
    const indexLength = 8 * 16 + 4;
    await expect(
      damaged((b) => {
        const cut = new Uint8Array(8 + indexLength);
        cut.set(b.subarray(0, 8));
        cut.set(b.subarray(b.byteLength - indexLength), 8);
        return cut;
      }),
    ).rejects.toMatchObject({ _tag: 'CorruptZarr' });
    await expect(damaged((b) => b.subarray(0, 20))).rejects.toMatchObject({ _tag: 'CorruptZarr' });
    stored.map.set('d/c/0/0/0', shard.slice());
    const reader = new RegionReader(array, stored, 1 << 20);
    stored.map.set('d/c/0/0/0', shard.subarray(0, 20));
    await expect(reader.readRegion(region)).rejects.toMatchObject({ _tag: 'CorruptZarr' });
    stored.map.set('d/c/0/0/0', shard);
    expect([...(await reader.readRegion(region))]).toEqual(expected([2, 70, 45], region));
  });
});

describe('writeMaskArray', () => {
  it('round-trips a mask that crosses shard and chunk edges', async () => {
    const width = 4100;
    const height = 530;
    const mask = new Uint8Array(width * height).map((_, i) =>
      ((i % width) * (Math.floor(i / width) + 1)) % 3 === 0 ? 1 : 0,
    );
    const sink = memoryStore();
    await writeMaskArray(sink, { mask, width, height });
    const read = await readMaskArray(sink);
    expect({ width: read.width, height: read.height }).toEqual({ width, height });
    expect(Buffer.compare(read.mask, mask)).toBe(0);
  });
});

describe('ShardedArray read by zarrita and zarr-python', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sps-zarr-'));
    const sink = folderStore(dir);
    await fill(new ShardedArray('u8', spec('uint8')), sink);
    await fill(new ShardedArray('f32', spec('float32')), sink, (c, y, x) => valueAt(c, y, x) / 7);
    await fill(new ShardedArray('u32', spec('uint32', { fillValue: 7 })), sink, (c, y, x) =>
      y < 32 ? 7 : valueAt(c, y, x) * 1e6,
    );
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('zarrita reads the same values', async () => {
    const u8 = await readWithZarrita(dir, 'u8', [null, [5, 66], [3, 44]]);
    expect(u8.shape).toEqual([2, 61, 41]);
    expect([...u8.data]).toEqual(expected([2], { y: 5, x: 3, height: 61, width: 41 }));
    const f32 = await readWithZarrita(dir, 'f32', [null, null, null]);
    const floats = new Float32Array(
      f32.data.buffer.slice(f32.data.byteOffset, f32.data.byteOffset + f32.data.byteLength),
    );
    expect([...floats]).toEqual(
      expected([2], { y: 0, x: 0, height: 70, width: 45 }).map((v) => Math.fround(v / 7)),
    );
  });

  it('zarr-python reads the same values and verifies the index checksums', async () => {
    const result = await runPythonJson<{ u8: number[]; f32: number[]; u32: number[]; shape: number[] }>(
      `
import json, sys, zarr
u8, f32, u32 = (zarr.open_array(f'{sys.argv[1]}/{name}', mode='r') for name in ('u8', 'f32', 'u32'))
print(json.dumps({
  'shape': list(u8.shape),
  'u8': u8[:, 5:66, 3:44].ravel().tolist(),
  'f32': f32[:].ravel().tolist(),
  'u32': u32[:, 28:36, 40:45].ravel().tolist(),
}))
`,
      [dir],
    );
    expect(result.shape).toEqual([2, 70, 45]);
    expect(result.u8).toEqual(expected([2], { y: 5, x: 3, height: 61, width: 41 }));
    expect(result.f32).toEqual(
      expected([2], { y: 0, x: 0, height: 70, width: 45 }).map((v) => Math.fround(v / 7)),
    );
    const u32: number[] = [];
    for (let c = 0; c < 2; c++) {
      for (let y = 28; y < 36; y++)
        for (let x = 40; x < 45; x++) u32.push(y < 32 ? 7 : valueAt(c, y, x) * 1e6);
    }
    expect(result.u32).toEqual(u32);
  });
});
