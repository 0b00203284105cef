import type { listStatuses, workflowFacets } from '../../schemas/samples';

/**
 * The list page's query string is the API's facet parameters, in the order the service writes
 * a list's `appUrl` (scope unless `mine`, then q, dates, status, workflow, marker, field), so a
 * page URL and an API call are interchangeable (contract, GET /samples).
 */
export interface ListFacets {
  scope: 'mine' | 'public' | 'all';
  q: string;
  uploaded_from: string;
  uploaded_to: string;
  status: string[];
  workflow: string[];
  marker: string[];
  field: string[];
}

export function facetsFromSearch(search: string): ListFacets {
  const params = new URLSearchParams(search);
  const scope = params.get('scope');
  return {
    scope: scope === 'public' || scope === 'all' ? scope : 'mine',
    q: params.get('q') ?? '',
    uploaded_from: params.get('uploaded_from') ?? '',
    uploaded_to: params.get('uploaded_to') ?? '',
    status: params.getAll('status'),
    workflow: params.getAll('workflow'),
    marker: params.getAll('marker'),
    field: params.getAll('field'),
  };
}

export function searchOf(facets: ListFacets): string {
  const params = new URLSearchParams();
  if (facets.scope !== 'mine') params.append('scope', facets.scope);
  for (const name of ['q', 'uploaded_from', 'uploaded_to'] as const) {
    if (facets[name]) params.append(name, facets[name]);
  }
  for (const name of ['status', 'workflow', 'marker', 'field'] as const) {
    for (const value of facets[name]) params.append(name, value);
  }
  const search = params.toString();
  return search ? `?${search}` : '';
}

/**
 * The same facets as the SDK's query object (repeatable parameters as arrays), in the same
 * order and with the same omissions as {@link searchOf}: the request's query string is the
 * page's.
 */
export function apiQueryOf(facets: ListFacets) {
  const some = (values: string[]) => (values.length > 0 ? values : undefined);
  return {
    scope: facets.scope === 'mine' ? undefined : facets.scope,
    q: facets.q || undefined,
    uploaded_from: facets.uploaded_from || undefined,
    uploaded_to: facets.uploaded_to || undefined,
    status: some(facets.status) as (typeof listStatuses)[number][] | undefined,
    workflow: some(facets.workflow) as (typeof workflowFacets)[number][] | undefined,
    marker: some(facets.marker),
    field: some(facets.field),
  };
}

/** One `field` facet: `DEFINITION_ID:operator[:VALUE]`, VALUE JSON (contract, GET /samples). */
export interface FieldClause {
  definitionId: string;
  operator: string;
  /** The JSON value; undefined for `is_empty` and `is_not_empty`. */
  value?: string | number | boolean;
}

const valueless = new Set(['is_empty', 'is_not_empty']);

export function operatorTakesValue(operator: string): boolean {
  return !valueless.has(operator);
}

/** A clause of the address, or null when it is not one (kept verbatim for the service to judge). */
export function parseFieldClause(clause: string): FieldClause | null {
  const match = /^([^:]+):([a-z_]+)(?::(.*))?$/s.exec(clause);
  if (!match) return null;
  const [, definitionId, operator, raw] = match;
  if (raw === undefined) return { definitionId: definitionId!, operator: operator! };
  try {
    const value = JSON.parse(raw) as unknown;
    if (!['string', 'number', 'boolean'].includes(typeof value)) return null;
    return { definitionId: definitionId!, operator: operator!, value: value as FieldClause['value'] };
  } catch {
    return null;
  }
}

export function fieldClauseOf(clause: FieldClause): string {
  const head = `${clause.definitionId}:${clause.operator}`;
  return clause.value === undefined ? head : `${head}:${JSON.stringify(clause.value)}`;
}
