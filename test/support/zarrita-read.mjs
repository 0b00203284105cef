// Reads a region of a Zarr v3 array with zarrita and writes its bytes (C order) to stdout.
// A separate process because zarrita is ESM-only and Jest runs our tests as CommonJS.
// Usage: node zarrita-read.mjs STORE_ROOT ARRAY_PATH '[[start, stop] | null, ...]'
// STORE_ROOT is a folder, or an http(s) URL of a store root read with zarrita's FetchStore.
import FileSystemStore from '@zarrita/storage/fs';
import * as zarr from 'zarrita';

const [root, arrayPath, selection] = process.argv.slice(2);
const store = /^https?:\/\//.test(root) ? new zarr.FetchStore(root) : new FileSystemStore(root);
const array = await zarr.open.v3(zarr.root(store).resolve(arrayPath), { kind: 'array' });
const slices = JSON.parse(selection).map((range) => (range === null ? null : zarr.slice(range[0], range[1])));
const chunk = await zarr.get(array, slices);
const bytes = new Uint8Array(chunk.data.buffer, chunk.data.byteOffset, chunk.data.byteLength);
process.stderr.write(JSON.stringify({ shape: chunk.shape, dtype: array.dtype }));
process.stdout.write(bytes);
