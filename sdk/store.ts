import type * as Zarr from 'zarrita' with { 'resolution-mode': 'import' };
import type { SpsClient } from './client';
import { isSpsError, networkError, SpsError } from './errors';
import { errorOf } from './transport';

type ZarrModule = typeof Zarr;
export type StoreArray = Zarr.Array<Zarr.DataType, Zarr.FetchStore>;

interface Multiscale {
  name?: string;
  datasets: { path: string }[];
}

/** An OME-Zarr store of the service, opened with zarrita over HTTP. */
export interface OmeZarrStore {
  /** Where its keys resolved when opened (a signed store link's root, or a files endpoint). */
  url: string;
  /** The root group's attributes (`ome`, and for results the top-level `multiscales`). */
  attributes: Record<string, unknown>;
  /** The multiscale images of the root, by name (a marker, for a prediction store). */
  multiscales: Map<string, string[]>;
  /** One level (0 = full resolution) of a multiscale image as a zarrita array. */
  open(name: string, level?: number): Promise<StoreArray>;
  /** The attributes of a group inside the store (a marker's image group: its `omero` window). */
  groupAttributes(path: string): Promise<Record<string, unknown>>;
}

/** zarrita ships only ES modules: loaded on first use, so the CommonJS build can require the SDK. */
const loadZarrita = (): Promise<ZarrModule> => import('zarrita');

function multiscalesOf(attributes: Record<string, unknown>): Multiscale[] {
  const ome = attributes.ome as { multiscales?: Multiscale[] } | undefined;
  return ome?.multiscales ?? (attributes.multiscales as Multiscale[] | undefined) ?? [];
}

/** How a store's reads reach the service: an answer that is a key's bytes or 404, else a throw. */
type KeyFetch = (request: Request) => Promise<Response>;

async function openStore(url: string, fetchKey: KeyFetch): Promise<OmeZarrStore> {
  const zarr = await loadZarrita();
  // The service and signed links answer suffix ranges: a shard index is one request, not HEAD + GET.
  const store = new zarr.FetchStore(url, { useSuffixRequest: true, fetch: fetchKey });
  const root = zarr.root(store);
  const group = await zarr.open.v3(root, { kind: 'group' });
  const attributes = group.attrs as Record<string, unknown>;
  const multiscales = new Map(
    multiscalesOf(attributes).map((m, i) => [m.name ?? String(i), m.datasets.map((d) => d.path)]),
  );
  return {
    url,
    attributes,
    multiscales,
    async open(name, level = 0) {
      const path = multiscales.get(name)?.[level];
      if (path === undefined) throw new SpsError('not_found', `the store has no level ${level} of ${name}`);
      return zarr.open.v3(root.resolve(path), { kind: 'array' });
    },
    async groupAttributes(path) {
      const group = await zarr.open.v3(root.resolve(path), { kind: 'group' });
      return group.attrs as Record<string, unknown>;
    },
  };
}

/**
 * Reads through the client's transport: the credential of the moment on every read (an OAuth
 * token refreshed while a viewer stays open), its retries, and the service's refusals as
 * `SpsError`. A 404 stays a missing key, as Zarr readers expect.
 */
function authenticatedFetch(client: SpsClient): KeyFetch {
  return async (request) => {
    try {
      return await client.transport.send({
        method: 'GET',
        url: request.url,
        headers: Object.fromEntries(request.headers),
        signal: request.signal,
      });
    } catch (err) {
      if (isSpsError(err) && err.status === 404) return new Response(null, { status: 404 });
      throw err;
    }
  };
}

/**
 * Reads through a signed store link, which is its own credential: a read refused with 403 (the
 * link's hour is up) goes again under the root `renewableStoreRoot` renews. zarrita keeps the
 * first link's keys, rewritten here to the current root.
 */
function linkFetch(root: RenewableStoreRoot): KeyFetch {
  const first = root.current;
  const under = (request: Request, at: string) =>
    at === first ? request : new Request(at + request.url.slice(first.length), request);
  const read = async (request: Request) => {
    try {
      return await fetch(request);
    } catch (err) {
      if (request.signal.aborted) throw err;
      throw networkError(`GET ${request.url}`, err);
    }
  };
  return async (request) => {
    const used = root.current;
    let response = await read(under(request, used));
    const again = response.status === 403 ? await root.renewedAfter(used) : undefined;
    if (again !== undefined) response = await read(under(request, again));
    if (response.ok || response.status === 404) return response;
    throw await errorOf(response);
  };
}

/** A signed store link's root, which reads refused under it can renew. */
export interface RenewableStoreRoot {
  /** The root reads go under now (ends in `/`). */
  readonly current: string;
  /**
   * The root to read again under, once a read under `used` was refused: a fresh link's, asked
   * of `renew` once for all the reads refused under the same root; `undefined` without `renew`.
   */
  renewedAfter(used: string): Promise<string | undefined>;
}

export function renewableStoreRoot(link: string, renew?: () => Promise<string>): RenewableStoreRoot {
  const rootOf = (url: string) => new URL(storeLinkRoot(url)).href;
  let current = rootOf(link);
  let renewing: Promise<string> | undefined;
  return {
    get current() {
      return current;
    },
    async renewedAfter(used) {
      if (!renew) return undefined;
      if (used === current) {
        renewing ??= renew()
          .then(rootOf)
          .finally(() => {
            renewing = undefined;
          });
        current = await renewing;
      }
      return current;
    },
  };
}

const STORE_LINK = /^https?:\/\/[^?#]+\/stores\/[^/?#]+\/zarr\.json$/;

/**
 * The root of the store a signed store link (`…/stores/{token}/zarr.json`) opens: every key of
 * the store reads relative to it with no other credential, until the link expires.
 */
export function storeLinkRoot(link: string): string {
  if (!STORE_LINK.test(link)) throw new SpsError('invalid_request', `not a signed store link: ${link}`);
  return link.slice(0, -'zarr.json'.length);
}

/**
 * A store opened through its signed store link (a job's `resultUrl`, an export's `rootUrl`).
 * Reads work while the link lives (1 h); with `renew`, a read refused after that asks it for a
 * fresh link and the store reads on.
 */
export function openStoreLink(
  link: string,
  options: {
    /** A fresh link to the same store (its endpoint asked again), for reads past this one's hour. */
    renew?: () => Promise<string>;
  } = {},
): Promise<OmeZarrStore> {
  const root = renewableStoreRoot(link, options.renew);
  return openStore(root.current, linkFetch(root));
}

/**
 * A job's prediction store, through the signed store link of its results; its reads go on past
 * the link's hour (a refused read asks the results endpoint for a fresh link).
 */
export async function openResults(client: SpsClient, jobId: string): Promise<OmeZarrStore> {
  const resultUrl = async () => (await client.jobs.results(jobId)).resultUrl;
  return openStoreLink(await resultUrl(), { renew: resultUrl });
}

/** A sample's processed H&E pyramid (authenticated files endpoint). */
export async function openSampleHe(client: SpsClient, sampleId: string): Promise<OmeZarrStore> {
  const base = `${client.transport.api}/samples/${encodeURIComponent(sampleId)}/he/files/`;
  return openStore(base, authenticatedFetch(client));
}

/**
 * A public cohort sample's images through the public byte proxy (any organization's credential,
 * no credits): its H&E pyramid, and its root, whose multiscales are the pinned markers.
 */
export async function openPublicSample(
  client: SpsClient,
  publicId: string,
): Promise<{ he: OmeZarrStore; markers: OmeZarrStore }> {
  const base = `${client.transport.api}/public/samples/${encodeURIComponent(publicId)}/zarr/`;
  const read = authenticatedFetch(client);
  const [he, markers] = await Promise.all([openStore(`${base}he/`, read), openStore(base, read)]);
  return { he, markers };
}

/** A completed segmentation layer's label mask: the uint32 OME-NGFF label image of its manifest. */
export async function openSegmentationMask(
  client: SpsClient,
  sampleId: string,
  layerId: string,
): Promise<OmeZarrStore> {
  const base = `${client.transport.api}/samples/${encodeURIComponent(sampleId)}/segmentation/${encodeURIComponent(layerId)}/files/mask/`;
  return openStore(base, authenticatedFetch(client));
}

/**
 * A file read piece by piece with Range requests: the shape of hyparquet's `AsyncBuffer`, so a
 * Parquet reader fetches only the footer and the column chunks it needs.
 */
export interface RangeFile {
  byteLength: number;
  slice(start: number, end?: number): Promise<ArrayBuffer>;
}

/** A file of a completed segmentation layer (`features/instances.parquet`, ...), by Range requests. */
export async function openSegmentationFile(
  client: SpsClient,
  sampleId: string,
  layerId: string,
  path: string,
): Promise<RangeFile> {
  const read = (range: string) => client.segmentation.file(sampleId, layerId, path, { headers: { range } });
  // A one-byte read answers the size in Content-Range (`bytes 0-0/SIZE`) without a HEAD route.
  const first = await read('bytes=0-0');
  const total = Number(first.headers.get('content-range')?.split('/')[1]);
  await first.body?.cancel();
  if (!Number.isSafeInteger(total)) throw new SpsError('invalid_response', `${path} answered no size`);
  return {
    byteLength: total,
    async slice(start, end = total) {
      if (end <= start) return new ArrayBuffer(0);
      return (await read(`bytes=${start}-${end - 1}`)).arrayBuffer();
    },
  };
}

interface ArrayMetadata {
  node_type: 'array' | 'group';
  shape?: number[];
  chunk_grid?: { configuration: { chunk_shape: number[] } };
  chunk_key_encoding?: { name: 'default' | 'v2'; configuration?: { separator?: string } };
}

/** Every chunk (or shard) key of a Zarr v3 array, relative to the array. */
function chunkKeys(meta: ArrayMetadata): string[] {
  const shape = meta.shape ?? [];
  const chunk = meta.chunk_grid?.configuration.chunk_shape ?? shape;
  const encoding = meta.chunk_key_encoding ?? { name: 'default' };
  const separator = encoding.configuration?.separator ?? (encoding.name === 'v2' ? '.' : '/');
  let indices: number[][] = [[]];
  shape.forEach((size, axis) => {
    const count = Math.ceil(size / (chunk[axis] ?? size));
    indices = indices.flatMap((prefix) => Array.from({ length: count }, (_, i) => [...prefix, i]));
  });
  return indices.map((index) => {
    const joined = index.length === 0 ? '0' : index.join(separator);
    return encoding.name === 'v2' ? joined : `c${separator}${joined}`;
  });
}

/**
 * The keys of a multiscale OME-Zarr store, found by walking its metadata (Zarr has no
 * listing): the group `zarr.json` of every level's ancestors, each array's `zarr.json`, and
 * every chunk key its grid allows (a chunk that was never written answers 404: fill value).
 */
export async function storeKeys(readJson: (key: string) => Promise<unknown>): Promise<string[]> {
  const root = (await readJson('zarr.json')) as { attributes?: Record<string, unknown> };
  const keys = new Set<string>(['zarr.json']);
  for (const multiscale of multiscalesOf(root.attributes ?? {})) {
    for (const { path } of multiscale.datasets) {
      const parts = path.split('/');
      for (let depth = 1; depth < parts.length; depth++)
        keys.add(`${parts.slice(0, depth).join('/')}/zarr.json`);
      const meta = (await readJson(`${path}/zarr.json`)) as ArrayMetadata;
      keys.add(`${path}/zarr.json`);
      for (const key of chunkKeys(meta)) keys.add(`${path}/${key}`);
    }
  }
  return [...keys];
}
