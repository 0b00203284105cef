import type { Sql } from '../../db';
import { fieldValuesOf, listFieldDefinitions } from '../../db/sample-fields';
import {
  type FieldClause,
  listSamples,
  listTrash,
  type SampleListFilter,
  type SampleListRow,
} from '../../db/sample-list';
import type { PagePosition } from '../../db/samples';
import { hasControlCharacter, isCalendarDay } from '../../schemas/common';
import {
  type FieldDefinition,
  facetsOf,
  fieldOperators,
  operatorsByType,
  type SampleListItem,
  type SampleListPage,
  type SampleListQuery,
} from '../../schemas/samples';
import type { Principal } from '../auth';
import { createCursorCodec } from '../cursor';
import { AppError } from '../errors';
import { listPublicPage, type PublicPage } from './public-samples';
import { TRASH_WINDOW_DAYS } from './samples';

const DAY_MS = 24 * 3600 * 1000;
const badField = (clause: string, why: string) =>
  new AppError('invalid_request', `field '${clause}': ${why}`);

function expectedJsonType(definition: FieldDefinition): (value: unknown) => boolean {
  switch (definition.valueType) {
    case 'number':
      return (value) => typeof value === 'number' && Number.isFinite(value);
    case 'boolean':
      return (value) => typeof value === 'boolean';
    case 'date':
      return (value) => typeof value === 'string' && isCalendarDay(value);
    default:
      return (value) => typeof value === 'string';
  }
}

/** `DEFINITION_UUID:op[:VALUE]`, VALUE JSON-encoded; operators checked against the type. */
export function parseFieldClause(clause: string, definitions: Map<string, FieldDefinition>): FieldClause {
  const first = clause.indexOf(':');
  const second = first < 0 ? -1 : clause.indexOf(':', first + 1);
  const id = first < 0 ? clause : clause.slice(0, first);
  const operator = first < 0 ? '' : clause.slice(first + 1, second < 0 ? undefined : second);
  const rawValue = second < 0 ? undefined : clause.slice(second + 1);
  const definition = definitions.get(id);
  if (!definition) throw badField(clause, 'no such field definition in this organization');
  if (!(fieldOperators as readonly string[]).includes(operator))
    throw badField(clause, `unknown operator '${operator}'`);
  const op = operator as FieldClause['operator'];
  if (!operatorsByType[definition.valueType].includes(op)) {
    throw badField(clause, `operator '${op}' does not apply to a ${definition.valueType} field`);
  }
  const needsValue = op !== 'is_empty' && op !== 'is_not_empty';
  if (!needsValue) {
    if (rawValue !== undefined) throw badField(clause, `operator '${op}' takes no value`);
    return { definition, operator: op };
  }
  if (rawValue === undefined) throw badField(clause, `operator '${op}' needs a JSON value`);
  let value: unknown;
  try {
    value = JSON.parse(rawValue);
  } catch {
    throw badField(clause, 'the value must be JSON (then URL-encoded)');
  }
  if (!expectedJsonType(definition)(value))
    throw badField(clause, `the value does not fit a ${definition.valueType} field`);
  if (typeof value === 'string' && hasControlCharacter(value))
    throw badField(clause, 'the value must not contain control characters');
  return { definition, operator: op, value: value as string | number | boolean };
}

/** The web application's list URL carrying the same facets. */
function listAppUrl(appUrl: string, query: SampleListQuery): string {
  const params = new URLSearchParams();
  if (query.scope !== 'mine') params.append('scope', query.scope);
  for (const [name, value] of Object.entries(facetsOf(query))) {
    for (const item of Array.isArray(value) ? value : [value]) params.append(name, String(item));
  }
  const search = params.toString();
  return `${appUrl}/samples${search ? `?${search}` : ''}`;
}

function toListItem(
  appUrl: string,
  row: SampleListRow,
  fields: Map<string, Record<string, unknown>>,
): SampleListItem {
  return {
    ownership: 'mine',
    id: row.id,
    name: row.name,
    filename: row.filename,
    status: row.status as SampleListItem['status'],
    fileSize: row.fileSize,
    fields: fields.get(row.id) ?? {},
    createdAt: row.createdAt.toISOString(),
    appUrl: `${appUrl}/samples/${row.id}`,
  };
}

export function createSampleListService(deps: { sql: Sql; appUrl: string; signingSecret: string }) {
  const { sql } = deps;
  const cursors = createCursorCodec(deps.signingSecret, 'samples');
  const trashCursors = createCursorCodec(deps.signingSecret, 'trash');
  const publicCursors = createCursorCodec(deps.signingSecret, 'samples-public');
  /** The position before the first public row. */
  const START: PagePosition = { createdAt: '', id: '' };
  const fromStart = (position: PagePosition) => (position.createdAt === '' ? undefined : position);
  const decodePublic = (cursor: string | undefined) =>
    cursor ? fromStart(publicCursors.decode(cursor)) : undefined;
  /** A cursor of the public block, or undefined for one of the owned block. */
  function tryDecodePublic(cursor: string): PagePosition | undefined {
    try {
      return publicCursors.decode(cursor);
    } catch {
      return undefined;
    }
  }

  async function toFilter(principal: Principal, query: SampleListQuery): Promise<SampleListFilter> {
    const definitions = query.field?.length
      ? new Map((await listFieldDefinitions(sql, principal.organizationId)).map((d) => [d.id, d]))
      : new Map<string, FieldDefinition>();
    return {
      organizationId: principal.organizationId,
      q: query.q,
      uploadedFrom: query.uploaded_from,
      uploadedTo: query.uploaded_to,
      statuses: query.status,
      workflows: query.workflow,
      markers: query.marker?.map((clause) => {
        const [name, state] = clause.split(':') as [string, 'requested' | 'completed'];
        return { name, state };
      }),
      fields: query.field?.map((clause) => parseFieldClause(clause, definitions)),
    };
  }

  /** One page of owned rows: `limit + 1` are read to know whether another page follows. */
  async function ownedPage(principal: Principal, query: SampleListQuery, after: PagePosition | undefined) {
    const filter = await toFilter(principal, query);
    const rows = await listSamples(sql, filter, { limit: query.limit + 1, after });
    const page = rows.slice(0, query.limit);
    const fields = await fieldValuesOf(
      sql,
      page.map((row) => row.id),
    );
    return {
      items: page.map((row) => toListItem(deps.appUrl, row, fields)),
      more: rows.length > query.limit,
      last: page.at(-1)?.position,
    };
  }

  function publicPage(principal: Principal, query: SampleListQuery, limit: number, after?: PagePosition) {
    return listPublicPage(sql, {
      appUrl: deps.appUrl,
      q: query.q,
      // Under `all` the organization's own public samples are already listed as owned rows.
      excludeOrganizationId: query.scope === 'all' ? principal.organizationId : undefined,
      limit,
      after,
    });
  }

  const publicNext = (page: PublicPage) => (page.more && page.last ? publicCursors.encode(page.last) : null);

  /**
   * `mine`: the organization's rows. `public`: the public cohort (only `q` gets here). `all`:
   * owned rows first, then the public block, which a facet other than `q` suppresses. A cursor
   * says which block it continues (two signing purposes), so pages never repeat or skip rows.
   */
  async function list(principal: Principal, query: SampleListQuery): Promise<SampleListPage> {
    const appUrl = listAppUrl(deps.appUrl, query);
    if (query.scope === 'public') {
      const page = await publicPage(principal, query, query.limit, decodePublic(query.cursor));
      return { items: page.items, nextCursor: publicNext(page), appUrl };
    }
    const withPublicBlock =
      query.scope === 'all' && Object.keys(facetsOf(query)).every((name) => name === 'q');
    const publicAfter = withPublicBlock && query.cursor ? tryDecodePublic(query.cursor) : undefined;
    if (publicAfter) {
      const page = await publicPage(principal, query, query.limit, fromStart(publicAfter));
      return { items: page.items, nextCursor: publicNext(page), appUrl };
    }
    const owned = await ownedPage(principal, query, query.cursor ? cursors.decode(query.cursor) : undefined);
    if (owned.more || !withPublicBlock) {
      return {
        items: owned.items,
        nextCursor: owned.more && owned.last ? cursors.encode(owned.last) : null,
        appUrl,
      };
    }
    const room = query.limit - owned.items.length;
    const page = await publicPage(principal, query, Math.max(room, 1));
    if (room === 0) {
      // The owned block filled this page exactly: the next one starts the public block.
      return {
        items: owned.items,
        nextCursor: page.items.length > 0 ? publicCursors.encode(START) : null,
        appUrl,
      };
    }
    return { items: [...owned.items, ...page.items], nextCursor: publicNext(page), appUrl };
  }

  async function trash(principal: Principal, page: { limit: number; cursor?: string }) {
    const after = page.cursor ? trashCursors.decode(page.cursor) : undefined;
    const rows = await listTrash(sql, principal.organizationId, { limit: page.limit + 1, after });
    const items = rows.slice(0, page.limit);
    const fields = await fieldValuesOf(
      sql,
      items.map((row) => row.id),
    );
    const last = items.at(-1);
    return {
      items: items.map((row) => ({
        ...toListItem(deps.appUrl, row, fields),
        trashedAt: row.trashedAt!.toISOString(),
        purgeAt: new Date(row.trashedAt!.getTime() + TRASH_WINDOW_DAYS * DAY_MS).toISOString(),
      })),
      nextCursor: rows.length > page.limit && last ? trashCursors.encode(last.position) : null,
    };
  }

  return { list, trash };
}

export type SampleListService = ReturnType<typeof createSampleListService>;
