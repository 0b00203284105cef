import { endOfDay } from '../../schemas/samples';
import type { SpsClient } from '../../sdk';
import { h, pressed, samples } from './dom';

type Rule = Parameters<SpsClient['samples']['setExpiration']>[1];
type RuleChoice = 'date' | 'never' | 'default';
type Sample = Awaited<ReturnType<SpsClient['samples']['get']>>;

/** The rule a sample follows now, and its day in UTC: what its page's control opens on. */
function currentRule({ expiresAt, expiresAtSource }: Sample): { choice: RuleChoice; day: string } {
  const day = expiresAt ? new Date(expiresAt).toISOString().slice(0, 10) : '';
  if (expiresAtSource !== 'custom') return { choice: 'default', day };
  return { choice: expiresAt ? 'date' : 'never', day };
}

/**
 * The expiration rule of PATCH /samples/{id}/expiration and its bulk form: a day, never, or
 * the organization default (exactly one). A day means its end in UTC: the sample is kept
 * through the day picked.
 */
function rulePicker(
  idPrefix: string,
  current: { choice: RuleChoice; day: string } = { choice: 'date', day: '' },
) {
  const choice = h(
    'select',
    { id: `${idPrefix}-rule`, 'aria-label': 'Expiration rule' },
    h('option', { value: 'date' }, 'Expire at the end of'),
    h('option', { value: 'never' }, 'Never expire'),
    h('option', { value: 'default' }, 'Organization default'),
  );
  const day = h('input', { id: `${idPrefix}-day`, type: 'date', 'aria-label': 'Expiration day (UTC)' });
  choice.value = current.choice;
  day.value = current.day;
  const showDay = () => {
    day.hidden = choice.value !== 'date';
  };
  showDay();
  choice.addEventListener('change', showDay);
  const rule = (): Rule => {
    if (choice.value === 'never') return { neverExpire: true };
    if (choice.value === 'default') return { useOrgDefault: true };
    // A blank day goes as typed, for the service's validation message.
    return { expiresAt: day.value ? endOfDay(day.value) : '' };
  };
  return { controls: [choice, day], rule };
}

function outcome(idPrefix: string) {
  return {
    result: h('p', { id: `${idPrefix}-result`, role: 'status', class: 'note' }),
    error: h('p', { id: `${idPrefix}-error`, role: 'alert', class: 'field-error', hidden: true }),
  };
}

/**
 * Sets the expiration of the selected list rows in one all-or-nothing call; the service's
 * refusal (a row outside the caller's permission, a bad date) is shown beside the control.
 */
export function bulkExpiration(sps: SpsClient, selected: () => string[], onDone: () => void) {
  const count = h('span', { id: 'selected-count', role: 'status' }, 'No samples selected.');
  const picker = rulePicker('bulk-expiration');
  const { result, error } = outcome('bulk-expiration');
  const apply = h('button', { type: 'button', disabled: true }, 'Set expiration');
  const send = pressed(async () => {
    result.textContent = '';
    const answer = await sps.samples.setExpirationBulk({ sampleIds: selected(), ...picker.rule() });
    result.textContent = `Expiration set on ${samples(answer.updated)}.`;
    onDone();
  }, error);
  // Held while it runs, then offered again only while rows are selected.
  apply.addEventListener('click', async (event) => {
    await send(event);
    update();
  });
  const update = () => {
    const n = selected().length;
    count.textContent = n === 0 ? 'No samples selected.' : `${n} selected.`;
    apply.disabled = n === 0;
  };
  const node = h(
    'div',
    {},
    h(
      'div',
      { class: 'bulk actions', role: 'group', 'aria-label': 'Selected samples' },
      count,
      ...picker.controls,
      apply,
    ),
    error,
    result,
  );
  return { node, update };
}

/** The expiration control of one sample's page, opened on the rule the sample follows now. */
export function sampleExpiration(sps: SpsClient, sample: Sample, onDone: () => void): HTMLElement {
  const picker = rulePicker('expiration', currentRule(sample));
  const { result, error } = outcome('expiration');
  const apply = h('button', { type: 'button' }, 'Set expiration');
  apply.addEventListener(
    'click',
    pressed(async () => {
      await sps.samples.setExpiration(sample.id, picker.rule());
      onDone();
    }, error),
  );
  return h('div', {}, h('div', { class: 'actions' }, ...picker.controls, apply), error, result);
}
