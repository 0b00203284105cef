import './account';
import { listStatuses, workflowFacets } from '../../schemas/samples';
import type { SpsClient } from '../../sdk';
import { badge, bytes, clearError, h, main, needKey, showError, when } from './dom';
import { apiQueryOf, facetsFromSearch, type ListFacets, searchOf } from './list-query';
import { client } from './session';

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

function filterForm(facets: ListFacets, onChange: (facets: ListFacets) => void): HTMLFormElement {
  const text = (id: string, label: string, value: string, type = 'text', extra = {}) =>
    h(
      'div',
      { class: 'field' },
      h('label', { for: id }, label),
      h('input', { id, name: id, type, value, ...extra }),
    );
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
    checkboxes('Status', 'status', listStatuses, facets.status),
    checkboxes('Workflow', 'workflow', workflowFacets, facets.workflow),
    text('uploaded_from', 'Uploaded from', facets.uploaded_from, 'date'),
    text('uploaded_to', 'Uploaded to', facets.uploaded_to, 'date'),
    text('marker', 'Markers (NAME:requested or NAME:completed, comma separated)', facets.marker.join(', ')),
    facets.field.length > 0
      ? h('p', { class: 'note' }, `Field filters kept from the address: ${facets.field.join(' · ')}`)
      : null,
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Apply filters')),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const value = (name: string) => String(data.get(name) ?? '').trim();
    onChange({
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
      field: facets.field,
    });
  });
  return form;
}

function row(item: Item): HTMLTableRowElement {
  const title = item.name ?? item.filename;
  return h(
    'tr',
    { 'data-id': item.id },
    h('td', {}, h('a', { href: item.ownership === 'mine' ? `samples/${item.id}` : item.appUrl }, title)),
    h('td', {}, item.filename),
    h('td', { class: 'status' }, badge(item.status)),
    h('td', {}, bytes(Number(item.fileSize))),
    h('td', {}, when(item.createdAt)),
    h('td', {}, item.ownership),
  );
}

function start(sps: SpsClient): void {
  let facets = facetsFromSearch(location.search);
  const results = h('tbody', {});
  const summary = h('p', { id: 'list-summary', role: 'status' });
  const more = h('button', { type: 'button', hidden: true }, 'Load more');
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
        ...['Name', 'Filename', 'Status', 'Size', 'Uploaded', 'Ownership'].map((label) =>
          h('th', { scope: 'col' }, label),
        ),
      ),
    ),
    results,
  );
  let cursor: string | undefined;
  let generation = 0;
  let refresh: ReturnType<typeof setTimeout> | undefined;

  async function load(append: boolean): Promise<void> {
    const mine = ++generation;
    clearTimeout(refresh);
    clearError();
    summary.textContent = 'Loading…';
    try {
      const page = await sps.samples.list({ ...apiQueryOf(facets), cursor: append ? cursor : undefined });
      if (mine !== generation) return;
      if (!append) results.replaceChildren();
      results.append(...page.items.map(row));
      cursor = page.nextCursor ?? undefined;
      more.hidden = !cursor;
      summary.textContent = `${results.children.length} sample(s) shown${cursor ? ', more available' : ''}.`;
      if (page.items.some((item) => moving.has(item.status)))
        refresh = setTimeout(refreshStatuses, REFRESH_MS);
    } catch (err) {
      if (mine !== generation) return;
      summary.textContent = '';
      showError(err);
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
        if (sample && mine === generation) tr.querySelector('.status')!.replaceChildren(badge(sample.status));
      }),
    );
    if (mine === generation && rows.length > 0) refresh = setTimeout(refreshStatuses, REFRESH_MS);
  }

  function apply(next: ListFacets): void {
    facets = next;
    history.pushState(null, '', `${location.pathname}${searchOf(facets)}`);
    void load(false);
  }

  let form = filterForm(facets, apply);
  more.addEventListener('click', () => void load(true));
  // Back and forward move between filter sets: the address is the state.
  window.addEventListener('popstate', () => {
    facets = facetsFromSearch(location.search);
    const next = filterForm(facets, apply);
    form.replaceWith(next);
    form = next;
    void load(false);
  });
  main().append(form, summary, h('div', { class: 'table-wrap' }, table), more);
  void load(false);
}

const sps = client();
if (sps) start(sps);
else needKey();
