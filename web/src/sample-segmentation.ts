import type { SpsClient } from '../../sdk';
import { badge, h, pressed, showError, when } from './dom';

type State = Awaited<ReturnType<SpsClient['segmentation']['get']>>;

const active = new Set(['queued', 'running', 'postprocessing']);
const POLL_MS = 3000;
/** How long a saved scale's own segmentation start is looked for (the recount queues it). */
const AUTO_START_POLLS = 10;

/** A failed run in the service's cooldown: a retry is refused until it has passed. */
const coolingDown = (state: State) => state.status === 'failed' && !state.retryable;

function describe(state: State): (Node | string)[] {
  const parts: (Node | string)[] = ['Segmentation ', badge(state.status)];
  if (state.layer) {
    parts.push(
      ` · ${state.layer.instanceCount} cells, model ${state.layer.modelVersion}, made ${when(state.layer.createdAt)}`,
    );
    if (state.layer.markers.length > 0) parts.push(` · marker tables: ${state.layer.markers.join(', ')}`);
  }
  // Why the run failed, in the service's words.
  if (state.job?.errorMessage) parts.push(` · ${state.job.errorMessage}`);
  if (coolingDown(state)) parts.push(' · a retry is possible a short while after the failure');
  return parts;
}

/**
 * Segmentation of an owned ready sample: its state, a start (or retry) button while none is
 * running or done, and the state followed until it settles. Credit-free (contract). A slide
 * without a scale gets the button once `scaleSet` says one was saved (the service refuses it
 * before with `mpp_required`); one uploaded with `autoSegment` (`autoStart`) then starts by
 * itself, as does a new run when the scale of a segmented slide changes, which the section
 * looks for. A run it saw reach `completed` calls `completed` (the page draws itself again: the
 * viewer's cell outlines, the details).
 */
export function segmentationSection(
  sps: SpsClient,
  sample: { id: string; status: string; mpp: number | null; segmentation: State },
  options: { autoStart: boolean; scaleNeeded: () => HTMLElement; completed: () => void },
): { section: HTMLElement; scaleSet(changed: boolean): void } {
  const { autoStart, scaleNeeded } = options;
  const state = h('p', { id: 'segmentation-state', role: 'status', class: 'section-state' });
  const error = h('p', { id: 'segmentation-error', role: 'alert', class: 'field-error', hidden: true });
  const start = h('button', { type: 'button', hidden: true }, 'Start segmentation');
  const unscaled = sample.mpp === null ? scaleNeeded() : null;
  let scaled = unscaled === null;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let last: State | undefined;
  /** Looks left for a run the service starts by itself, and the run it would follow (or none). */
  let autoStartPolls = 0;
  let runBefore: string | null = null;

  const paint = (current: State) => {
    // Seen ending here (a quick run may go from not started, or from the layer it replaces, to
    // completed between two looks).
    const ended = last?.status !== 'completed' || last.job?.id !== current.job?.id;
    if (last && current.status === 'completed' && ended) options.completed();
    last = current;
    state.replaceChildren(...describe(current));
    const startable = current.status === 'not_started' || current.retryable;
    start.hidden = !startable || sample.status !== 'ready' || !scaled;
    start.textContent = current.status === 'not_started' ? 'Start segmentation' : 'Retry segmentation';
    clearTimeout(timer);
    autoStartPolls = (current.job?.id ?? null) === runBefore ? Math.max(0, autoStartPolls - 1) : 0;
    // Followed until it settles, through a cooldown until the retry button can be offered, and
    // a while after a saved scale until the service's own start shows.
    if (active.has(current.status) || coolingDown(current) || autoStartPolls > 0)
      timer = setTimeout(() => void refresh(), POLL_MS);
  };
  const refresh = async () => {
    try {
      paint(await sps.segmentation.get(sample.id));
    } catch (err) {
      showError(err, error);
    }
  };
  start.addEventListener(
    'click',
    pressed(async () => paint(await sps.segmentation.start(sample.id)), error),
  );
  // The sample's detail carries the state: drawn from it at once, then followed from there.
  paint(sample.segmentation);
  const section = h(
    'section',
    { 'aria-labelledby': 'segmentation-title' },
    h('h2', { id: 'segmentation-title' }, 'Cell segmentation'),
    sample.status === 'ready' ? unscaled : h('p', {}, 'Segmentation needs a ready sample.'),
    state,
    h('div', { class: 'actions' }, start),
    error,
  );
  const scaleSet = (changed: boolean) => {
    scaled = true;
    unscaled?.remove();
    if (autoStart || (changed && last?.status === 'completed')) {
      autoStartPolls = AUTO_START_POLLS;
      runBefore = last?.job?.id ?? null;
      void refresh();
    } else if (last) paint(last);
  };
  return { section, scaleSet };
}
