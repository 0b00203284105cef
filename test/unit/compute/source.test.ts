import { isComputeError } from '../../../compute/errors';
import { storeSource } from '../../../compute/source';
import { type KeyValueStore, memoryStore, type RangeQuery, type StoreOptions } from '../../../compute/store';

const MiB = 1 << 20;

/** `size` bytes whose every byte tells its own offset (mod 251, a prime, so blocks differ). */
function numbered(size: number): Uint8Array {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i++) bytes[i] = i % 251;
  return bytes;
}

/** Records every ranged read that reaches the store, and the signal it carried. */
function recording(store: KeyValueStore) {
  const ranges: Array<{ range: RangeQuery; signal: AbortSignal | undefined }> = [];
  const view: KeyValueStore = {
    get: (key, options) => store.get(key, options),
    getRange: (key, range, options?: StoreOptions) => {
      ranges.push({ range, signal: options?.signal });
      return store.getRange(key, range, options);
    },
    put: (key, bytes, options) => store.put(key, bytes, options),
  };
  return { view, ranges };
}

describe('storeSource: exact reads over the byte contract', () => {
  const data = numbered(3.5 * MiB);

  test('reads exactly the bytes asked for, across block boundaries and in one large read', async () => {
    const store = memoryStore(new Map([['slide', data]]));
    const source = storeSource(store, 'slide', data.byteLength);
    expect(source.size).toBe(data.byteLength);
    const across = await source.read(MiB - 10, 20);
    expect([...across]).toEqual([...data.subarray(MiB - 10, MiB + 10)]);
    const large = await source.read(MiB / 2, 2 * MiB);
    expect(large.byteLength).toBe(2 * MiB);
    expect(Buffer.compare(large, data.subarray(MiB / 2, MiB / 2 + 2 * MiB))).toBe(0);
    const tail = await source.read(data.byteLength - 3, 3);
    expect([...tail]).toEqual([...data.subarray(-3)]);
  });

  test('small reads inside one block cost one ranged read, with the caller signal passed on', async () => {
    const { view, ranges } = recording(memoryStore(new Map([['slide', data]])));
    const source = storeSource(view, 'slide', data.byteLength);
    const { signal } = new AbortController();
    await source.read(100, 8, signal);
    await source.read(5000, 8, signal);
    await source.read(MiB - 4, 8, signal);
    expect(ranges).toEqual([
      { range: { offset: 0, length: MiB }, signal },
      { range: { offset: MiB, length: MiB }, signal },
    ]);
  });

  test('a read past the end, or of an object that shrank, is Truncated', async () => {
    const map = new Map([['slide', data]]);
    const source = storeSource(memoryStore(map), 'slide', data.byteLength);
    const truncated = (err: unknown) => isComputeError(err, 'Truncated');
    expect(await source.read(data.byteLength - 2, 4).catch(truncated)).toBe(true);
    map.set('slide', data.subarray(0, MiB));
    expect(await source.read(2 * MiB, 4).catch(truncated)).toBe(true);
  });

  test('an aborted signal stops a read before the store is asked', async () => {
    const { view, ranges } = recording(memoryStore(new Map([['slide', data]])));
    const source = storeSource(view, 'slide', data.byteLength);
    await expect(source.read(0, 4, AbortSignal.abort())).rejects.toMatchObject({ name: 'AbortError' });
    expect(ranges).toEqual([]);
  });
});
