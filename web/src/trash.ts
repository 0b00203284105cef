import './account';
import type { SpsClient } from '../../sdk';
import {
  bytes,
  clearError,
  h,
  main,
  needKey,
  pressed,
  samples,
  showError,
  when,
  whenShownAgain,
} from './dom';
import { client } from './session';

type TrashItem = Awaited<ReturnType<SpsClient['samples']['listTrash']>>['items'][number];

/** The Trash: samples that expired or were trashed, each restorable until its purge time. */
function start(sps: SpsClient): void {
  const results = h('tbody', {});
  const summary = h('p', { id: 'trash-summary', role: 'status' });
  const more = h('button', { type: 'button', hidden: true }, 'Load more');
  const empty = h(
    'p',
    { id: 'trash-empty', hidden: true },
    'Nothing is in Trash. A sample moved here (from its page or with sps samples trash), or one that expired, stays until its purge time and can be restored until then.',
  );
  let cursor: string | undefined;
  /** The ids of the first page as last drawn, to tell on the tab's return whether it changed. */
  let firstPage = '';
  const tableWrap = h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      {},
      h('caption', {}, 'Trashed samples; each is deleted for good at its purge time'),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ...['Name', 'Size', 'Trashed', 'Purged at', 'Action'].map((label) =>
            h('th', { scope: 'col' }, label),
          ),
        ),
      ),
      results,
    ),
  );
  const idsOf = (items: TrashItem[]) => items.map((item) => item.id).join();
  const count = () => {
    summary.textContent = `${samples(results.children.length)} in Trash.`;
    empty.hidden = results.children.length > 0 || cursor !== undefined;
    tableWrap.hidden = !empty.hidden;
  };

  const row = (item: TrashItem) => {
    const error = h('span', { role: 'alert', class: 'field-error', hidden: true });
    const restore = h(
      'button',
      {
        type: 'button',
        'aria-label': `Restore ${item.name ?? item.filename}`,
        onclick: pressed(async () => {
          await sps.samples.restore(item.id);
          tr.remove();
          count();
        }, error),
      },
      'Restore',
    );
    const tr = h(
      'tr',
      { 'data-id': item.id },
      h('td', {}, item.name ?? item.filename),
      h('td', {}, bytes(Number(item.fileSize))),
      h('td', {}, when(item.trashedAt)),
      h('td', {}, when(item.purgeAt)),
      h('td', {}, restore, error),
    );
    return tr;
  };

  async function load(append: boolean): Promise<void> {
    clearError();
    try {
      const page = await sps.samples.listTrash({ cursor: append ? cursor : undefined });
      if (!append) {
        results.replaceChildren();
        firstPage = idsOf(page.items);
      }
      results.append(...page.items.map(row));
      cursor = page.nextCursor ?? undefined;
      more.hidden = !cursor;
      count();
    } catch (err) {
      showError(err);
    }
  }

  more.addEventListener(
    'click',
    pressed(() => load(true)),
  );
  // Back on the tab, samples trashed or restored elsewhere (`sps`, another tab) are shown.
  whenShownAgain(async () => {
    const page = await sps.samples.listTrash({}).catch(() => undefined);
    if (page && idsOf(page.items) !== firstPage) await load(false);
  });
  main().append(summary, empty, tableWrap, more);
  void load(false);
}

const sps = client();
if (sps) start(sps);
else needKey();
