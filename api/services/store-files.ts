import { Readable } from 'node:stream';
import type { ObjectInfo, ObjectStore, OpenedObject } from '../../storage';
import { notFound } from '../errors';

/** One stored object opened for a response: whole, or the one range the request asked for. */
export interface StoredFile {
  body: Readable;
  info: ObjectInfo;
  range: { offset: number; length: number } | undefined;
  contentType: string;
}

export type RangeOf = (size: number) => { offset: number; length: number } | undefined;

/** The content type a reader of our stores expects, by the key's extension. */
export function contentTypeOf(key: string): string {
  if (key.endsWith('.json')) return 'application/json';
  if (key.endsWith('.parquet')) return 'application/vnd.apache.parquet';
  if (key.endsWith('.geojson')) return 'application/geo+json';
  return 'application/octet-stream';
}

/**
 * Opens `key` (404 when it is missing) for streaming; `rangeOf` picks a range from its size.
 * The size, range and body are those of the one version opened, so an object replaced meanwhile
 * cannot give an answer whose Content-Length its body does not fill. An answer that `bodiless`
 * says carries no body (a HEAD, a 304) reads only the metadata.
 */
export async function openStoredFile(
  store: ObjectStore,
  key: string,
  rangeOf?: RangeOf,
  options: { bodiless?: (info: ObjectInfo) => boolean } = {},
): Promise<StoredFile> {
  if (options.bodiless) {
    const info = await store.stat(key);
    if (!info) throw notFound('file');
    if (options.bodiless(info))
      return storedFile(key, { body: Readable.from([]), info, range: rangeOf?.(info.sizeBytes) });
  }
  const opened = await store.open(key, { rangeOf });
  if (!opened) throw notFound('file');
  return storedFile(key, opened);
}

function storedFile(key: string, opened: OpenedObject): StoredFile {
  return { ...opened, contentType: opened.info.contentType ?? contentTypeOf(key) };
}
