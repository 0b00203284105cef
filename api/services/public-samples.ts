import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type { Sql } from '../../db';
import { findPublicSampleStore, listPublicSamples, type PublicSampleStore } from '../../db/public-samples';
import type { PagePosition } from '../../db/samples';
import type { SampleListItem } from '../../schemas/samples';
import type { ObjectInfo, ObjectStore } from '../../storage';
import { AppError, notFound } from '../errors';

export interface PublicPage {
  items: SampleListItem[];
  more: boolean;
  last: PagePosition | undefined;
}

/** Public rows of the sample list: `id` is the publicId, and only the `public` field means anything. */
export async function listPublicPage(
  sql: Sql,
  input: { appUrl: string; q?: string; excludeOrganizationId?: string; limit: number; after?: PagePosition },
): Promise<PublicPage> {
  const rows = await listPublicSamples(
    sql,
    { q: input.q, excludeOrganizationId: input.excludeOrganizationId },
    { limit: input.limit + 1, after: input.after },
  );
  const page = rows.slice(0, input.limit);
  return {
    items: page.map((row) => ({
      ownership: 'public',
      id: row.publicId,
      name: row.displayName,
      filename: row.filename,
      status: row.status as SampleListItem['status'],
      fileSize: row.fileSize,
      fields: { public: true },
      createdAt: row.createdAt.toISOString(),
      appUrl: `${input.appUrl}/public/samples/${row.publicId}`,
    })),
    more: rows.length > input.limit,
    last: page.at(-1)?.position,
  };
}

/** One file of a public store, ready to stream, or a 304 for a matching `If-None-Match`. */
export type PublicFile =
  | { notModified: true; etag: string }
  | {
      notModified: false;
      etag: string;
      contentType: string;
      body: Readable;
      size: number;
      range: { offset: number; length: number } | undefined;
    };

export type RangeOf = (size: number) => { offset: number; length: number } | undefined;

const SEGMENT = /^[A-Za-z0-9._-]+$/;

const denied = (why: string) => new AppError('forbidden', `not readable in a public sample: ${why}`);

/**
 * Where a path of the public store lives, or a refusal. Only the root `zarr.json` and the plain
 * `markers/zarr.json` group (both made here), `he/...` and `markers/{pinned}/...` exist. Segments are checked as sent: no empty, `.` or `..`
 * segment, nothing but plain file-name characters, so neither traversal nor an encoded slash
 * (which the router decodes inside one segment) can reach another key.
 */
export function resolvePublicPath(
  store: Pick<PublicSampleStore, 'hePrefix' | 'predictionPrefix' | 'markers'>,
  segments: readonly string[],
): { kind: 'root' } | { kind: 'markers' } | { kind: 'object'; key: string } {
  if (segments.length === 0) throw denied('empty path');
  for (const segment of segments) {
    if (!SEGMENT.test(segment) || segment === '.' || segment === '..') throw denied('malformed path');
  }
  const [head, ...rest] = segments;
  if (head === 'zarr.json' && rest.length === 0) return { kind: 'root' };
  if (head === 'markers' && rest.length === 1 && rest[0] === 'zarr.json') return { kind: 'markers' };
  if (head === 'he' && rest.length > 0) return { kind: 'object', key: `${store.hePrefix}${rest.join('/')}` };
  if (head === 'markers' && rest.length > 1 && store.markers.includes(rest[0]!)) {
    return { kind: 'object', key: `${store.predictionPrefix}markers/${rest.join('/')}` };
  }
  throw denied('only he/ and the pinned markers/{marker}/ are served');
}

const contentTypeOf = (key: string) =>
  key.endsWith('.json') ? 'application/json' : 'application/octet-stream';

function etagOf(key: string, info: ObjectInfo): string {
  const digest = createHash('sha256')
    .update(`${key}\n${info.sizeBytes}\n${info.lastModified.getTime()}`)
    .digest('base64url')
    .slice(0, 27);
  return `"${digest}"`;
}

const matches = (ifNoneMatch: string | undefined, etag: string): boolean =>
  ifNoneMatch?.split(',').some((tag) => tag.trim() === '*' || tag.trim().replace(/^W\//, '') === etag) ??
  false;

/**
 * Reads of the public cohort: any organization's credential, never credits. A publicId that
 * is unknown, unpublished or whose sample is in Trash is 404.
 */
export function createPublicSampleService(deps: { sql: Sql; store: ObjectStore }) {
  const { sql, store } = deps;

  async function storeOf(publicId: string): Promise<PublicSampleStore> {
    const found = await findPublicSampleStore(sql, publicId);
    if (!found) throw notFound('public sample');
    return found;
  }

  /**
   * The root `zarr.json`: the prediction store's root cut down to the pinned markers (its
   * multiscales and statistics name every predicted marker), plus where the H&E is.
   */
  async function rootDocument(sample: PublicSampleStore): Promise<string> {
    const source = await store.get(`${sample.predictionPrefix}zarr.json`);
    const parsed = source
      ? (JSON.parse(Buffer.from(source).toString('utf8')) as Record<string, unknown>)
      : {};
    const attributes = (parsed.attributes ?? {}) as {
      ome?: { version?: string; multiscales?: { name?: string }[] };
    };
    const pinned = new Set(sample.markers);
    const multiscales = (attributes.ome?.multiscales ?? []).filter((m) => m.name && pinned.has(m.name));
    return JSON.stringify({
      zarr_format: 3,
      node_type: 'group',
      attributes: {
        ome: { version: attributes.ome?.version ?? '0.5', multiscales },
        // The same top-level copy as a prediction store's root, for Strand's clients.
        multiscales,
        publicSample: { publicId: sample.publicId, he: 'he/', markers: sample.markers },
      },
    });
  }

  /** Zarr v3 has no implicit groups: `markers/` is a node of its own, a plain group. */
  const markersDocument = JSON.stringify({ zarr_format: 3, node_type: 'group', attributes: {} });

  async function openObject(
    key: string,
    request: { ifNoneMatch?: string; rangeOf: RangeOf },
  ): Promise<PublicFile> {
    const info = await store.stat(key);
    if (!info) throw notFound('file');
    const etag = etagOf(key, info);
    if (matches(request.ifNoneMatch, etag)) return { notModified: true, etag };
    // The version opened, not the one stated, names the answer: it may have been replaced since.
    const opened = await store.open(key, { rangeOf: request.rangeOf });
    if (!opened) throw notFound('file');
    const { body, range } = opened;
    const size = opened.info.sizeBytes;
    return {
      notModified: false,
      etag: etagOf(key, opened.info),
      contentType: contentTypeOf(key),
      body,
      size,
      range,
    };
  }

  async function openZarrFile(
    publicId: string,
    segments: readonly string[],
    request: { ifNoneMatch?: string; rangeOf: RangeOf },
  ): Promise<PublicFile> {
    const sample = await storeOf(publicId);
    const target = resolvePublicPath(sample, segments);
    if (target.kind === 'object') return openObject(target.key, request);
    const document = target.kind === 'markers' ? markersDocument : await rootDocument(sample);
    const etag = `"${createHash('sha256').update(document).digest('base64url').slice(0, 27)}"`;
    if (matches(request.ifNoneMatch, etag)) return { notModified: true, etag };
    const bytes = Buffer.from(document);
    const range = request.rangeOf(bytes.length);
    const slice = range ? bytes.subarray(range.offset, range.offset + range.length) : bytes;
    return {
      notModified: false,
      etag,
      contentType: 'application/json',
      body: Readable.from([slice]),
      size: bytes.length,
      range,
    };
  }

  async function openThumbnail(publicId: string, request: { ifNoneMatch?: string }): Promise<PublicFile> {
    const sample = await storeOf(publicId);
    if (!sample.thumbnailKey) throw notFound('thumbnail');
    const file = await openObject(sample.thumbnailKey, { ...request, rangeOf: () => undefined });
    return file.notModified ? file : { ...file, contentType: 'image/jpeg' };
  }

  return { openZarrFile, openThumbnail };
}

export type PublicSampleService = ReturnType<typeof createPublicSampleService>;
