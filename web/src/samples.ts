import './account';
import { type FieldDefinition, listStatuses, workflowFacets } from '../../schemas/samples';
import type { SpsClient } from '../../sdk';
import { badge, bytes, clearError, h, main, needKey, samples, showError, when, whenShownAgain } from './dom';
import { bulkExpiration } from './expiration';
import { fieldFilters } from './field-filters';
import { apiQueryOf, facetsFromSearch, type ListFacets, searchOf } from './list-query';
import { client } from './session';
import { lazyThumbnails } from './thumbnails';

type Page = Awaited<ReturnType<SpsClient['samples']['list']>>;
type Item = Page['items'][number];

/** Statuses that ingest still moves on: rows in them are refreshed until they settle. */
const moving = new Set(['uploading', 'deid_running', 'preprocessing']);
const REFRESH_MS = 4000;

function checkboxes(legend: string, name: string, choices: readonly string[], checked: string[]) {
  return h(
    'fieldset',
    {},
    h('legend', {}, legend),
    ...choices.map((choice) =>
      h(
        'label',
        { class: 'check' },
        h('input', { type: 'checkbox', name, value: choice, checked: checked.includes(choice) }),
        ` ${choice.replaceAll('_', ' ')}`,
      ),
    ),
  );
}

/** How many facets past the search and scope are set. */
function facetsSet(facets: ListFacets): number {
  const dates = [facets.uploaded_from, facets.uploaded_to].filter(Boolean).length;
  return facets.status.length + facets.workflow.length + facets.marker.length + facets.field.length + dates;
}

/**
 * On a narrow screen the facets past the search and scope take a screen of their own, so they
 * fold away behind this button (the stylesheet shows it there only), saying how many are set.
 */
function facetsToggle(node: HTMLElement): { button: HTMLButtonElement; show(facets: ListFacets): void } {
  const button = h('button', {
    type: 'button',
    class: 'facets-toggle',
    'aria-expanded': 'false',
    'aria-controls': node.id,
  });
  button.addEventListener('click', () => {
    const open = button.getAttribute('aria-expanded') !== 'true';
    button.setAttribute('aria-expanded', String(open));
    node.classList.toggle('open', open);
  });
  const show = (facets: ListFacets) => {
    const set = facetsSet(facets);
    button.textContent = set > 0 ? `More filters (${set} set)` : 'More filters';
  };
  return { button, show };
}

function filterForm(
  facets: ListFacets,
  definitions: FieldDefinition[],
  onChange: (facets: ListFacets) => void,
): HTMLFormElement {
  const fields = fieldFilters(definitions, facets.field);
  const text = (id: string, label: string, value: string, type = 'text', extra = {}) =>
    h(
      'div',
      { class: 'field' },
      h('label', { for: id }, label),
      h('input', { id, name: id, type, value, ...extra }),
    );
  const facetsNode = h(
    'div',
    { id: 'list-facets', class: 'facets' },
    checkboxes('Status', 'status', listStatuses, facets.status),
    checkboxes('Workflow', 'workflow', workflowFacets, facets.workflow),
    text('uploaded_from', 'Uploaded from', facets.uploaded_from, 'date'),
    text('uploaded_to', 'Uploaded to', facets.uploaded_to, 'date'),
    text('marker', 'Markers (NAME:requested or NAME:completed, comma separated)', facets.marker.join(', ')),
    fields.node,
  );
  const toggle = facetsToggle(facetsNode);
  toggle.show(facets);
  const form = h(
    'form',
    { class: 'filters', role: 'search', 'aria-label': 'Filter samples' },
    text('q', 'Search name or filename', facets.q, 'search', { maxlength: 200 }),
    h(
      'div',
      { class: 'field' },
      h('label', { for: 'scope' }, 'Scope'),
      h(
        'select',
        { id: 'scope', name: 'scope' },
        ...(['mine', 'public', 'all'] as const).map((scope) =>
          h('option', { value: scope, selected: facets.scope === scope }, scope),
        ),
      ),
    ),
    toggle.button,
    facetsNode,
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Apply filters')),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const value = (name: string) => String(data.get(name) ?? '').trim();
    const chosen: ListFacets = {
      scope: value('scope') as ListFacets['scope'],
      q: value('q'),
      uploaded_from: value('uploaded_from'),
      uploaded_to: value('uploaded_to'),
      status: data.getAll('status').map(String),
      workflow: data.getAll('workflow').map(String),
      marker: value('marker')
        .split(',')
        .map((clause) => clause.trim())
        .filter(Boolean),
      field: fields.value(),
    };
    toggle.show(chosen);
    onChange(chosen);
  });
  return form;
}

/**
 * What an empty list says: where to begin when there is nothing yet, how to see everything
 * again when the filters leave nothing.
 */
function emptyNote(facets: ListFacets): (Node | string)[] {
  if (facets.q !== '' || facetsSet(facets) > 0) {
    const cleared = searchOf({ ...facetsFromSearch(''), scope: facets.scope });
    return [
      'No sample matches these filters. ',
      h('a', { href: `${location.pathname}${cleared}` }, 'Clear the filters'),
      '.',
    ];
  }
  if (facets.scope === 'public') return ['No public samples yet.'];
  return [
    'No samples yet: ',
    h('a', { href: 'upload' }, 'upload slides'),
    ' here, or with ',
    h('code', {}, 'sps upload'),
    ' (README).',
  ];
}

/** What a row shows that work elsewhere (`sps`, the SDK, another tab) changes: in, out, renamed. */
const rowKey = (item: Item) => `${item.id}:${item.name ?? item.filename}`;

function row(item: Item, thumbnail: HTMLCanvasElement, onSelect: () => void): HTMLTableRowElement {
  const title = item.name ?? item.filename;
  return h(
    'tr',
    { 'data-id': item.id },
    h(
      'td',
      {},
      item.ownership === 'mine'
        ? h('input', {
            type: 'checkbox',
            class: 'select',
            value: item.id,
            'aria-label': `Select ${title}`,
            onchange: onSelect,
          })
        : '',
    ),
    h('td', {}, thumbnail),
    h('td', {}, h('a', { href: item.ownership === 'mine' ? `samples/${item.id}` : item.appUrl }, title)),
    h('td', {}, item.filename),
    h('td', { class: 'status' }, badge(item.status)),
    h('td', {}, bytes(Number(item.fileSize))),
    h('td', {}, when(item.createdAt)),
    h('td', {}, item.ownership),
  );
}

async function start(sps: SpsClient): Promise<void> {
  let facets = facetsFromSearch(location.search);
  // Without definitions the field facets cannot be edited, but the list still loads.
  const definitions = await sps.samples.fields().then(
    (list) => list.fields,
    () => [] as FieldDefinition[],
  );
  const thumbnail = lazyThumbnails(sps);
  const selected = () =>
    [...results.querySelectorAll<HTMLInputElement>('input.select:checked')].map((input) => input.value);
  const bulk = bulkExpiration(sps, selected, () => {
    for (const input of results.querySelectorAll<HTMLInputElement>('input.select:checked'))
      input.checked = false;
    bulk.update();
  });
  const selectAll = h('input', {
    type: 'checkbox',
    'aria-label': 'Select every sample shown',
    onchange: () => {
      for (const input of results.querySelectorAll<HTMLInputElement>('input.select'))
        input.checked = selectAll.checked;
      bulk.update();
    },
  });
  const results = h('tbody', {});
  const summary = h('p', { id: 'list-summary', role: 'status' });
  const more = h('button', { type: 'button', hidden: true }, 'Load more');
  const empty = h('p', { id: 'list-empty', hidden: true });
  const table = h(
    'table',
    { class: 'samples' },
    h('caption', {}, 'Samples, newest first'),
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', { scope: 'col' }, selectAll),
        ...['Picture', 'Name', 'Filename', 'Status', 'Size', 'Uploaded', 'Ownership'].map((label) =>
          h('th', { scope: 'col' }, label),
        ),
      ),
    ),
    results,
  );
  const tableWrap = h('div', { class: 'table-wrap' }, table);
  let cursor: string | undefined;
  let generation = 0;
  let refresh: ReturnType<typeof setTimeout> | undefined;
  let loading = false;
  /** The first page as last drawn, to tell on the tab's return whether it changed. */
  let firstPage: string[] = [];

  async function load(append: boolean, keepSelected = new Set<string>()): Promise<void> {
    const mine = ++generation;
    loading = true;
    clearTimeout(refresh);
    clearError();
    summary.textContent = 'Loading…';
    try {
      const page = await sps.samples.list({ ...apiQueryOf(facets), cursor: append ? cursor : undefined });
      if (mine !== generation) return;
      if (!append) {
        results.replaceChildren();
        selectAll.checked = false;
        firstPage = page.items.map(rowKey);
      }
      results.append(...page.items.map((item) => row(item, thumbnail(item), bulk.update)));
      for (const input of results.querySelectorAll<HTMLInputElement>('input.select'))
        if (keepSelected.has(input.value)) input.checked = true;
      bulk.update();
      cursor = page.nextCursor ?? undefined;
      more.hidden = !cursor;
      summary.textContent = `${samples(results.children.length)} shown${cursor ? ', more available' : ''}.`;
      empty.hidden = results.children.length > 0;
      tableWrap.hidden = !empty.hidden;
      if (!empty.hidden) empty.replaceChildren(...emptyNote(facets));
      if (page.items.some((item) => moving.has(item.status)))
        refresh = setTimeout(refreshStatuses, REFRESH_MS);
    } catch (err) {
      if (mine !== generation) return;
      summary.textContent = '';
      showError(err);
    } finally {
      if (mine === generation) loading = false;
    }
  }

  /** Badges follow ingest: moving rows are re-read until they reach a settled status. */
  async function refreshStatuses(): Promise<void> {
    const rows = [...results.querySelectorAll<HTMLTableRowElement>('tr[data-id]')].filter((tr) =>
      moving.has(tr.querySelector('.badge')?.textContent?.replaceAll(' ', '_') ?? ''),
    );
    const mine = generation;
    await Promise.all(
      rows.map(async (tr) => {
        const sample = await sps.samples.get(tr.dataset.id!).catch(() => null);
        if (!sample || mine !== generation) return;
        tr.querySelector('.status')!.replaceChildren(badge(sample.status));
        // A row that became ready now has a pyramid to draw.
        const canvas = tr.querySelector('canvas.thumbnail');
        if (sample.status === 'ready' && canvas && !canvas.hasAttribute('data-state'))
          canvas.replaceWith(thumbnail({ ...sample, ownership: 'mine' }));
      }),
    );
    if (mine === generation && rows.length > 0) refresh = setTimeout(refreshStatuses, REFRESH_MS);
  }

  /**
   * Back on the tab, the first page is asked for again and the list drawn again when samples came,
   * went or were renamed meanwhile (an upload from `sps` appears), keeping the rows selected.
   */
  async function returned(): Promise<void> {
    if (loading) return;
    const mine = generation;
    const page = await sps.samples.list(apiQueryOf(facets)).catch(() => undefined);
    if (!page || mine !== generation || page.items.map(rowKey).join() === firstPage.join()) return;
    await load(false, new Set(selected()));
  }

  function apply(next: ListFacets): void {
    facets = next;
    history.pushState(null, '', `${location.pathname}${searchOf(facets)}`);
    void load(false);
  }

  let form = filterForm(facets, definitions, apply);
  more.addEventListener('click', () => void load(true));
  // Infinite scroll: the next page loads when the button scrolls into view (it stays for keyboards).
  new IntersectionObserver((entries) => {
    if (entries.some((entry) => entry.isIntersecting) && cursor && !loading) void load(true);
  }).observe(more);
  // Back and forward move between filter sets: the address is the state.
  window.addEventListener('popstate', () => {
    facets = facetsFromSearch(location.search);
    const next = filterForm(facets, definitions, apply);
    form.replaceWith(next);
    form = next;
    void load(false);
  });
  whenShownAgain(returned);
  main().append(form, bulk.node, summary, empty, tableWrap, more);
  void load(false);
}

const sps = client();
if (sps) void start(sps);
else needKey();
