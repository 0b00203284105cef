// Reads whole arrays with zarrita and prints, per array, its shape, dtype and the SHA-256 of its
// bytes (C order). A store path ending in .zip is read through @zarrita/storage's zip store.
// A separate process because zarrita is ESM-only and Jest runs our tests as CommonJS.
// Usage: node zarrita-digest.mjs STORE '["array/path", ...]'
import { createHash } from 'node:crypto';
import { openAsBlob } from 'node:fs';
import FileSystemStore from '@zarrita/storage/fs';
import ZipFileStore from '@zarrita/storage/zip';
import * as zarr from 'zarrita';

const [storePath, paths] = process.argv.slice(2);
const store = storePath.endsWith('.zip')
  ? ZipFileStore.fromBlob(await openAsBlob(storePath))
  : new FileSystemStore(storePath);
const result = {};
for (const arrayPath of JSON.parse(paths)) {
  const array = await zarr.open.v3(zarr.root(store).resolve(arrayPath), { kind: 'array' });
  const chunk = await zarr.get(array);
  const bytes = new Uint8Array(chunk.data.buffer, chunk.data.byteOffset, chunk.data.byteLength);
  result[arrayPath] = {
    shape: chunk.shape,
    dtype: array.dtype,
    sha256: createHash('sha256').update(bytes).digest('hex'),
  };
}
process.stdout.write(JSON.stringify(result));
