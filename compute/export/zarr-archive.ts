import { ComputeError } from '../errors';
import { encodeJson, type GroupMetadata, groupMetadata, type KeyValueStore, parseJson } from '../zarr';
import { imageElement, labelElement, SPATIALDATA_CONTAINER, stackedOmero } from './spatialdata-archive';
import type { ZipEntrySource } from './zarr-zip';

/** One Zarr hierarchy (or part of one) to put into an archive. */
export interface ArchiveSource {
  sink: KeyValueStore;
  /** The node (group or array) in the source to copy with everything under it; `''` the root. */
  from: string;
  /** Where that node lands in the archive; `''` the archive root. */
  to: string;
  /**
   * The keys to copy, for a hierarchy that is not an NGFF image (an AnnData table); without
   * them the node is walked through its NGFF metadata.
   */
  keys?: readonly string[];
  /**
   * Arrays seen without their leading axis, which must be 1 long (a `c, y, x` label mask as the
   * `y, x` image SpatialData reads): the same chunk bytes under metadata and keys of one
   * dimension fewer.
   */
  dropLeadingAxis?: boolean;
  /**
   * Arrays seen as channel `index` of `count` stacked along their leading axis (1 long in the
   * source): one marker's `c, y, x` levels as a channel of a multichannel image. The same chunk
   * bytes under keys `c/{index}/…`; every source of a stack must have the same array metadata.
   * Groups of a stack come from its channel 0 (or from a document).
   */
  channel?: { index: number; count: number };
}

/** A `zarr.json` written into the archive instead of (or besides) what the sources hold. */
export interface ArchiveDocument {
  /** Archive path of the node (`''` the root, `labels`). */
  path: string;
  metadata: GroupMetadata;
}

/**
 * The entries of one archive that composes several hierarchies: every `zarr.json` first (the
 * root first, then by depth, so a reader of the archive's head sees the whole hierarchy), then
 * the chunk and shard objects source by source. Only metadata is read here; chunk entries read
 * their source when the zip writer reaches them (a chunk never written is left out then).
 *
 * A source node is walked through what NGFF says is under it: the datasets of its multiscales
 * (and any group met on the way), its `labels` group and the label images that lists. `documents`
 * replace a source's `zarr.json` at the same archive path or add groups of their own; a folder
 * between nodes that has none gets an empty group; two sources may not land on one path.
 */
export async function planZarrArchive(
  sources: readonly ArchiveSource[],
  documents: readonly ArchiveDocument[] = [],
  signal?: AbortSignal,
): Promise<ZipEntrySource[]> {
  const metadata = new Map<string, ZipEntrySource>();
  const chunks: ZipEntrySource[] = [];
  for (const document of documents) {
    const bytes = encodeJson(document.metadata);
    metadata.set(metadataKey(document.path), { name: metadataKey(document.path), read: async () => bytes });
  }
  const overridden = new Set(metadata.keys());
  const claimed = new Set<string>();
  const stacked = new Map<string, Uint8Array>();
  for (const source of sources) {
    const walk = source.keys
      ? await listedNodes(source.sink, source.keys, signal)
      : await walkNode(source.sink, trim(source.from), signal);
    for (const node of walk.nodes) {
      const target = metadataKey(relocate(node.path, source));
      const bytes = viewOf(node.bytes, target, source);
      if (source.channel && claimed.has(target)) {
        // Another channel of the stack claimed it: the same array, or a group taken from channel 0.
        if (bytes && !sameBytes(stacked.get(target), bytes)) {
          throw new ComputeError('UnsupportedZarr', `${target}: the stacked arrays differ`);
        }
        continue;
      }
      if (claimed.has(target)) throw new RangeError(`two sources write ${target}`);
      claimed.add(target);
      if (source.channel && bytes) stacked.set(target, bytes);
      if (overridden.has(target) || !bytes) continue;
      metadata.set(target, { name: target, read: async () => bytes });
    }
    for (const { array, chunk } of walk.chunks) {
      const name = relocate(join(array, chunkOf(chunk, source)), source);
      const key = join(array, chunk);
      chunks.push({ name, read: (readSignal) => source.sink.get(key, { signal: readSignal }) });
    }
  }
  addMissingGroups(metadata);
  const ordered = [...metadata.values()].sort((a, b) => depth(a.name) - depth(b.name));
  return [...ordered, ...chunks];
}

/**
 * Zarr v3 has no implicit groups: a folder between nodes (the prediction store's `markers/`)
 * needs its own `zarr.json`, or zarr-python does not see the nodes under it when it lists.
 */
function addMissingGroups(metadata: Map<string, ZipEntrySource>): void {
  const empty = encodeJson(groupMetadata({}));
  for (const key of [...metadata.keys()]) {
    const parts = key.split('/').slice(0, -1);
    for (let i = 1; i < parts.length; i++) {
      const ancestor = metadataKey(parts.slice(0, i).join('/'));
      if (!metadata.has(ancestor)) metadata.set(ancestor, { name: ancestor, read: async () => empty });
    }
  }
}

/** The nodes and chunks of a listed set of keys (`zarr.json` keys are the nodes). */
async function listedNodes(
  sink: KeyValueStore,
  keys: readonly string[],
  signal?: AbortSignal,
): Promise<Walk> {
  const walk: Walk = { nodes: [], chunks: [] };
  for (const key of keys) {
    if (key !== 'zarr.json' && !key.endsWith('/zarr.json')) {
      walk.chunks.push({ array: '', chunk: key });
      continue;
    }
    const bytes = await sink.get(key, { signal });
    if (bytes === undefined) throw new ComputeError('UnsupportedZarr', `no ${key} in the source`);
    walk.nodes.push({ path: key.slice(0, -'zarr.json'.length).replace(/\/$/, ''), bytes });
  }
  return walk;
}

/**
 * A node's `zarr.json` as the archive holds it: arrays with their leading axis dropped or
 * stacked; a group of a stack's channel other than 0 is left out (`undefined`).
 */
function viewOf(bytes: Uint8Array, where: string, source: ArchiveSource): Uint8Array | undefined {
  if (source.dropLeadingAxis) return withoutLeadingAxis(bytes, where);
  if (!source.channel) return bytes;
  const doc = parseJson(bytes, where);
  if (doc.node_type !== 'array') return source.channel.index === 0 ? bytes : undefined;
  const shape = doc.shape as number[];
  if (shape[0] !== 1)
    throw new ComputeError('UnsupportedZarr', `${where}: no leading axis of length 1 to stack`);
  return new TextEncoder().encode(
    JSON.stringify({ ...doc, shape: [source.channel.count, ...shape.slice(1)] }),
  );
}

/** A chunk key (`c/0/…` of a leading axis of 1) as the archive holds it. */
function chunkOf(chunk: string, source: ArchiveSource): string {
  if (!source.dropLeadingAxis && !source.channel) return chunk;
  const rest = /^c\/0\/(.*)$/.exec(chunk)?.[1];
  if (rest === undefined)
    throw new ComputeError('UnsupportedZarr', `${chunk}: not a chunk of a leading axis of 1`);
  return source.channel ? `c/${source.channel.index}/${rest}` : `c/${rest}`;
}

function sameBytes(a: Uint8Array | undefined, b: Uint8Array): boolean {
  return a !== undefined && Buffer.from(a).equals(b);
}

/** An array's metadata with its leading (length 1) axis dropped; groups as they are. */
function withoutLeadingAxis(bytes: Uint8Array, where: string): Uint8Array {
  const doc = parseJson(bytes, where);
  if (doc.node_type !== 'array') return bytes;
  const shape = doc.shape as number[];
  const grid = doc.chunk_grid as { configuration: { chunk_shape: number[] } };
  const codecs = doc.codecs as {
    name: string;
    configuration?: { chunk_shape?: number[]; codecs?: unknown };
  }[];
  const inner = codecs[0]?.name === 'sharding_indexed' ? codecs[0].configuration : undefined;
  const plain = (list: unknown) =>
    Array.isArray(list) && list.every((c: { name?: string }) => c.name !== 'transpose');
  if (shape[0] !== 1 || !plain(codecs) || (inner && !plain(inner.codecs))) {
    throw new ComputeError('UnsupportedZarr', `${where}: no leading axis of length 1 to drop`);
  }
  const view = {
    ...doc,
    shape: shape.slice(1),
    ...(Array.isArray(doc.dimension_names) ? { dimension_names: doc.dimension_names.slice(1) } : {}),
    chunk_grid: { ...grid, configuration: { chunk_shape: grid.configuration.chunk_shape.slice(1) } },
    codecs: inner
      ? [
          { ...codecs[0], configuration: { ...inner, chunk_shape: inner.chunk_shape!.slice(1) } },
          ...codecs.slice(1),
        ]
      : codecs,
  };
  return new TextEncoder().encode(JSON.stringify(view));
}

function trim(path: string): string {
  return path.replace(/^\/+|\/+$/g, '');
}

function join(a: string, b: string): string {
  return a === '' ? b : b === '' ? a : `${a}/${b}`;
}

function metadataKey(path: string): string {
  return join(trim(path), 'zarr.json');
}

function depth(key: string): number {
  return key.split('/').length;
}

/** A source path under `source.from`, moved to `source.to`. */
function relocate(path: string, source: ArchiveSource): string {
  const from = trim(source.from);
  const rest = from === '' ? path : path === from ? '' : path.slice(from.length + 1);
  return join(trim(source.to), rest);
}

interface Walk {
  nodes: { path: string; bytes: Uint8Array }[];
  /** Chunk keys relative to their array's path. */
  chunks: { array: string; chunk: string }[];
}

async function walkNode(sink: KeyValueStore, root: string, signal?: AbortSignal): Promise<Walk> {
  const walk: Walk = { nodes: [], chunks: [] };
  const seen = new Set<string>();
  const visit = async (path: string, required: boolean): Promise<void> => {
    if (seen.has(path)) return;
    seen.add(path);
    const key = metadataKey(path);
    const bytes = await sink.get(key, { signal });
    if (bytes === undefined) {
      if (required) throw new ComputeError('UnsupportedZarr', `no ${key} in the source`);
      return;
    }
    walk.nodes.push({ path, bytes });
    const doc = parseJson(bytes, key);
    if (doc.node_type === 'array') {
      for (const chunk of chunkKeys(doc, key)) walk.chunks.push({ array: path, chunk });
      return;
    }
    const ome = (doc.attributes as { ome?: Record<string, unknown> } | undefined)?.ome ?? {};
    for (const dataset of datasetPaths(ome)) {
      // Groups between this one and the array (a marker's own image group) come along.
      const parts = dataset.split('/');
      for (let i = 1; i < parts.length; i++) await visit(join(path, parts.slice(0, i).join('/')), false);
      await visit(join(path, dataset), true);
    }
    if (Array.isArray(ome.labels)) {
      for (const label of ome.labels) if (typeof label === 'string') await visit(join(path, label), true);
    } else if (Array.isArray(ome.multiscales)) {
      await visit(join(path, 'labels'), false);
    }
  };
  await visit(root, true);
  return walk;
}

function datasetPaths(ome: Record<string, unknown>): string[] {
  const multiscales = Array.isArray(ome.multiscales) ? ome.multiscales : [];
  const paths: string[] = [];
  for (const multiscale of multiscales as { datasets?: { path?: unknown }[] }[]) {
    for (const dataset of multiscale.datasets ?? []) {
      if (typeof dataset.path === 'string' && !dataset.path.split('/').includes('..'))
        paths.push(dataset.path);
    }
  }
  return paths;
}

/** Every chunk key of a regular grid (shards, for a sharded array), in C order. */
export function chunkKeys(doc: Record<string, unknown>, where: string): string[] {
  const shape = doc.shape;
  const grid = doc.chunk_grid as { name?: unknown; configuration?: { chunk_shape?: unknown } } | undefined;
  const chunk = grid?.configuration?.chunk_shape;
  const encoding = doc.chunk_key_encoding as
    | { name?: unknown; configuration?: { separator?: unknown } }
    | undefined;
  const separator = encoding?.configuration?.separator ?? (encoding?.name === 'v2' ? '.' : '/');
  const whole = (v: unknown): v is number[] =>
    Array.isArray(v) && v.every((n) => Number.isSafeInteger(n) && n >= 0);
  if (
    grid?.name !== 'regular' ||
    !whole(shape) ||
    !whole(chunk) ||
    shape.length !== chunk.length ||
    chunk.some((n) => n === 0) ||
    (separator !== '/' && separator !== '.') ||
    (encoding?.name !== 'default' && encoding?.name !== 'v2')
  ) {
    throw new ComputeError('UnsupportedZarr', `${where}: not a regular chunk grid with default keys`);
  }
  const counts = shape.map((n, i) => Math.ceil(n / chunk[i]!));
  const keys: string[] = [];
  const index = counts.map(() => 0);
  if (counts.some((n) => n === 0)) return keys;
  for (;;) {
    const body = index.join(separator as string);
    keys.push(encoding.name === 'default' ? `c${separator}${body}` : body);
    let axis = counts.length - 1;
    while (axis >= 0 && ++index[axis]! === counts[axis]) index[axis--] = 0;
    if (axis < 0) return keys;
  }
}

/** Where the parts of a prediction export sit inside the archive (SpatialData's element paths). */
export const ARCHIVE_HE_PATH = 'images/he';
const ARCHIVE_PREDICTION_IMAGE_PATH = 'images/prediction';
export const ARCHIVE_LABELS_PATH = 'labels';
const ARCHIVE_TABLE_PATH = 'tables/table';

export interface PredictionArchiveSources {
  /** The prediction store (its root group lists one multiscale per marker). */
  prediction: KeyValueStore;
  /** The H&E pyramid, to add as the image `images/he`. */
  he?: KeyValueStore;
  /** A label image (the segmentation mask's group at the sink root), to add as `labels/{labelName}`. */
  labels?: KeyValueStore;
  /** Default `cells`. */
  labelName?: string;
  /**
   * The cell table written by `writeCellsTableZarr` at the sink root (its `region` the label
   * name), as `tables/table`; only with `labels`.
   */
  table?: { sink: KeyValueStore; keys: readonly string[] };
  signal?: AbortSignal;
}

/**
 * The entries of a zipped OME-Zarr of one prediction, laid out so that it is also a SpatialData
 * store (spatialdata-archive.ts). The prediction store sits at the archive root as it is stored
 * (its root `zarr.json`, still OME-NGFF 0.5 with Strand's `multiscales`, gains an `export`
 * attribute naming the parts and the root `spatialdata_attrs`); the markers again as one
 * multichannel image element `images/prediction` (each marker's chunks as one channel: the
 * same bytes twice in the zip, since a Zarr array cannot point at another's chunks); the H&E as
 * the image `images/he`; the mask as the 2-D labels `labels/cells`, which is also the NGFF label
 * image of the root, so viewers overlay the cells; the cell table as `tables/table`, its rows
 * annotating `labels/cells` by label value. All images and labels are in micrometres.
 */
export async function planPredictionArchive(sources: PredictionArchiveSources): Promise<ZipEntrySource[]> {
  const { signal } = sources;
  const labelName = sources.labelName ?? 'cells';
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(labelName)) throw new RangeError(`label name ${labelName}`);
  if (sources.table && !sources.labels) throw new RangeError('a cell table needs its labels');
  const root = await readGroup(sources.prediction, 'zarr.json', signal);
  const markers = (root.attributes.prediction as { markers?: unknown } | undefined)?.markers;
  if (!Array.isArray(markers) || markers.length === 0 || !markers.every((m) => typeof m === 'string')) {
    throw new ComputeError('UnsupportedZarr', 'the prediction store lists no markers');
  }
  const markerGroups = await Promise.all(
    markers.map((marker) => readGroup(sources.prediction, `markers/${marker}/zarr.json`, signal)),
  );
  const parts: ArchiveSource[] = [
    { sink: sources.prediction, from: '', to: '' },
    ...markers.map((marker, index) => ({
      sink: sources.prediction,
      from: `markers/${marker}`,
      to: ARCHIVE_PREDICTION_IMAGE_PATH,
      channel: { index, count: markers.length },
    })),
  ];
  const documents: ArchiveDocument[] = [
    {
      path: ARCHIVE_PREDICTION_IMAGE_PATH,
      metadata: imageElement(markerGroups[0]!, 'prediction', stackedOmero(markerGroups)),
    },
  ];
  const exported: Record<string, unknown> = {
    prediction: '',
    predictionImage: ARCHIVE_PREDICTION_IMAGE_PATH,
  };
  if (sources.he) {
    parts.push({ sink: sources.he, from: '', to: ARCHIVE_HE_PATH });
    documents.push({
      path: ARCHIVE_HE_PATH,
      metadata: imageElement(await readGroup(sources.he, 'zarr.json', signal), 'he'),
    });
    exported.he = ARCHIVE_HE_PATH;
  }
  if (sources.labels) {
    const labelPath = `${ARCHIVE_LABELS_PATH}/${labelName}`;
    parts.push({ sink: sources.labels, from: '', to: labelPath, dropLeadingAxis: true });
    const label = await readGroup(sources.labels, 'zarr.json', signal);
    documents.push({ path: labelPath, metadata: labelElement(label, labelName) });
    documents.push({
      path: ARCHIVE_LABELS_PATH,
      metadata: groupMetadata({ ome: { version: '0.5', labels: [labelName] } }),
    });
    exported.labels = [labelPath];
  }
  if (sources.table) {
    parts.push({ sink: sources.table.sink, from: '', to: ARCHIVE_TABLE_PATH, keys: sources.table.keys });
    exported.table = ARCHIVE_TABLE_PATH;
  }
  documents.push({
    path: '',
    metadata: groupMetadata({
      ...root.attributes,
      export: exported,
      spatialdata_attrs: SPATIALDATA_CONTAINER,
    }),
  });
  return planZarrArchive(parts, documents, signal);
}

async function readGroup(sink: KeyValueStore, key: string, signal?: AbortSignal): Promise<GroupMetadata> {
  const bytes = await sink.get(key, { signal });
  if (bytes === undefined) throw new ComputeError('UnsupportedZarr', `no ${key}: the store is unfinished`);
  const doc = parseJson(bytes, key);
  if (doc.zarr_format !== 3 || doc.node_type !== 'group' || typeof doc.attributes !== 'object') {
    throw new ComputeError('UnsupportedZarr', `${key} is not a Zarr v3 group`);
  }
  return doc as unknown as GroupMetadata;
}
