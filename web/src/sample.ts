import './account';
import { typedNumber } from '../../schemas/common';
import { failedSampleStatuses, preparingSampleStatuses, settledSampleStatuses } from '../../schemas/enums';
import { isTerminalJobStatus } from '../../schemas/jobs';
import type { FieldDefinition } from '../../schemas/samples';
import { ingestFailure, isSpsError, type JobEvent, type SpsClient, streamJob } from '../../sdk';
import { badge, bytes, clearError, h, main, needKey, pressed, showError, when, whenShownAgain } from './dom';
import { sampleExpiration } from './expiration';
import { exportsSection } from './sample-exports';
import { customFieldInputs } from './sample-fields';
import { segmentationSection } from './sample-segmentation';
import { client } from './session';

type Sample = Awaited<ReturnType<SpsClient['samples']['get']>>;
type Job = Sample['jobs'][number];

/** The sample id from `/samples/{id}` (the last path segment, whatever the APP_URL prefix). */
function sampleId(): string {
  return decodeURIComponent(location.pathname.replace(/\/+$/, '').split('/').pop() ?? '');
}

const expirationSources: Record<NonNullable<Sample['expiresAtSource']>, string> = {
  org_default: "the organization's default",
  custom: 'set for this sample',
};

function expires({ expiresAt, expiresAtSource }: Sample): string {
  const date = expiresAt ? when(expiresAt) : 'never';
  return expiresAtSource ? `${date} (${expirationSources[expiresAtSource]})` : date;
}

/** Four significant digits to read; the exact value in its tooltip (and the edit field). */
function micronsPerPixel(mpp: number): HTMLElement {
  return h('span', { title: String(mpp) }, String(Number(mpp.toPrecision(4))));
}

/** `failure`: the upload's `statusMessage`, why ingest stopped short of ready. */
function metadata(sample: Sample, failure: string | null): HTMLElement {
  const entries: [string, Node | string][] = [
    ['Status', badge(sample.status)],
    ...(failure === null ? [] : [['Why it failed', failure] as [string, string]]),
    ['Filename', sample.filename],
    ['Size', bytes(Number(sample.fileSize))],
    ['Dimensions', sample.widthPx && sample.heightPx ? `${sample.widthPx} × ${sample.heightPx} px` : '—'],
    ['Microns per pixel', sample.mpp === null ? '—' : micronsPerPixel(sample.mpp)],
    ['Tags', sample.tags.join(', ') || '—'],
    ['Uploaded', when(sample.createdAt)],
    ['Expires', expires(sample)],
    ['In Trash since', sample.trashedAt ? when(sample.trashedAt) : '—'],
    ['Segmentation', sample.segmentation.status.replaceAll('_', ' ')],
  ];
  return h(
    'dl',
    { class: 'meta' },
    ...entries.flatMap(([term, value]) => [h('dt', {}, term), h('dd', {}, value)]),
  );
}

/**
 * Edits name, tags and mpp with one PATCH of the changed properties; a refusal is shown inline
 * beside the field the service's message names (its message starts with the field's path).
 */
function editForm(
  sps: SpsClient,
  sample: Sample,
  definitions: FieldDefinition[],
  onSaved: (sample: Sample) => void,
): HTMLFormElement {
  const field = (id: string, label: string, value: string, hint?: string) => {
    const error = h('p', { id: `${id}-error`, class: 'field-error', role: 'alert', hidden: true });
    const input = h('input', { id, name: id, type: 'text', value, 'aria-describedby': `${id}-error` });
    return {
      input,
      error,
      node: h(
        'div',
        { class: 'field' },
        h('label', { for: id }, label),
        input,
        hint ? h('small', {}, hint) : null,
        error,
      ),
    };
  };
  const name = field('name', 'Name', sample.name ?? '', 'Empty reverts to the filename.');
  const tags = field('tags', 'Tags', sample.tags.join(', '), 'Comma separated.');
  const mpp = field('mpp', 'Microns per pixel', sample.mpp === null ? '' : String(sample.mpp));
  const custom = customFieldInputs(definitions, sample.fields ?? {});
  const formError = h('p', { id: 'edit-error', class: 'field-error', role: 'alert', hidden: true });
  const saved = h('p', { role: 'status', class: 'note' });
  const form = h(
    'form',
    { class: 'edit', 'aria-label': 'Edit sample' },
    name.node,
    tags.node,
    mpp.node,
    ...custom.nodes,
    formError,
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Save changes')),
    saved,
  );
  const fields = { name, tags, mpp };
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    for (const part of [...Object.values(fields).map((f) => f.error), ...custom.errors(), formError])
      clearError(part);
    saved.textContent = '';
    const body: Record<string, unknown> = {};
    if (name.input.value.trim() !== (sample.name ?? '')) body.name = name.input.value;
    const tagList = tags.input.value
      .split(',')
      .map((tag) => tag.trim())
      .filter(Boolean);
    const changed = custom.changes();
    if (tagList.join(',') !== sample.tags.join(',')) changed.tags = tagList;
    if (Object.keys(changed).length > 0) body.fields = changed;
    const mppText = mpp.input.value.trim();
    if (mppText !== (sample.mpp === null ? '' : String(sample.mpp))) {
      // A number goes as a number; anything else goes as typed, for the service to judge.
      const number = typedNumber(mppText);
      body.mpp = mppText !== '' && Number.isFinite(number) ? number : mppText;
    }
    if (Object.keys(body).length === 0) {
      saved.textContent = 'Nothing changed.';
      return;
    }
    try {
      const updated = await sps.samples.update(
        sample.id,
        body as Parameters<SpsClient['samples']['update']>[1],
      );
      saved.textContent = 'Saved.';
      onSaved(updated as Sample);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      // An organization field first: its message starts `fields.KEY:`.
      const named = (Object.keys(fields) as (keyof typeof fields)[]).find((key) =>
        new RegExp(`\\b${key}\\b`).test(message),
      );
      const target = custom.named(message) ?? (named ? fields[named] : undefined);
      showError(err, target?.error ?? formError);
      target?.input.setAttribute('aria-invalid', 'true');
      target?.input.focus();
    }
  });
  return form;
}

const percent = (progress: number | null) => (progress === null ? '—' : `${Math.round(progress * 100)} %`);

/** A followed job's row of the history, kept as its stream reports it. */
function showJobEvent(history: HTMLElement, jobId: string, event: JobEvent): void {
  const row = history.querySelector(`tr[data-job="${CSS.escape(jobId)}"]`);
  row?.querySelector('[data-field="status"]')?.replaceChildren(badge(event.status));
  const progress = row?.querySelector('[data-field="progress"]');
  if (progress) progress.textContent = percent(event.progress);
}

/**
 * The sample's jobs, each with its id to copy into `sps` or a notebook; a column of the
 * service's `errorMessage` when one of them failed.
 */
function jobHistory(sample: Sample): HTMLElement {
  if (sample.jobs.length === 0) return h('p', { id: 'jobs' }, 'No prediction jobs yet.');
  const failed = sample.jobs.some((job) => job.errorMessage !== null);
  const table = h(
    'table',
    { id: 'jobs' },
    h('caption', {}, `Prediction jobs (${sample.jobCount} in all, newest first)`),
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        ...['Job', 'Status', 'Markers', 'Progress', 'Credits', 'Created', 'Completed']
          .concat(failed ? ['Why it failed'] : [])
          .map((label) => h('th', { scope: 'col' }, label)),
      ),
    ),
    h(
      'tbody',
      {},
      ...sample.jobs.map((job: Job) =>
        h(
          'tr',
          { 'data-job': job.id },
          h('td', {}, h('code', {}, job.id)),
          h('td', { 'data-field': 'status' }, badge(job.status)),
          h('td', {}, job.markers.join(', ')),
          h('td', { 'data-field': 'progress' }, percent(job.progress)),
          h('td', {}, job.reservedCredits === null ? '—' : String(job.reservedCredits)),
          h('td', {}, when(job.createdAt)),
          h('td', {}, when(job.completedAt)),
          failed ? h('td', {}, job.errorMessage ?? '—') : null,
        ),
      ),
    ),
  );
  return h('div', { class: 'table-wrap' }, table);
}

function trashControls(sps: SpsClient, sample: Sample, reload: () => void): HTMLElement {
  const status = h('p', { role: 'alert', hidden: true, class: 'field-error' });
  const act = (label: string, run: () => Promise<unknown>) =>
    h(
      'button',
      {
        type: 'button',
        onclick: pressed(async () => {
          await run();
          reload();
        }, status),
      },
      label,
    );
  return h(
    'div',
    { class: 'actions' },
    sample.trashedAt
      ? act('Restore from Trash', () => sps.samples.restore(sample.id))
      : act('Move to Trash', () => sps.samples.trash(sample.id)),
    status,
  );
}

/**
 * Whether a ready slide without a scale was uploaded with `autoSegment` (the upload says, not the
 * sample): its segmentation then starts by itself once a scale is saved. Unknown is no.
 */
async function startsOnceScaled(sps: SpsClient, sample: Sample): Promise<boolean> {
  if (sample.mpp !== null || sample.status !== 'ready' || sample.segmentation.status !== 'not_started')
    return false;
  return sps.uploads.get(sample.id).then(
    (upload) => upload.autoSegment,
    () => false,
  );
}

/** Said where a slide has no scale (its file gave none): what needs one, and where to set it. */
function scaleNeeded(needs: string): HTMLElement {
  const edit = h('a', { href: '#mpp' }, 'Microns per pixel');
  edit.addEventListener('click', (event) => {
    event.preventDefault();
    document.getElementById('mpp')?.focus();
  });
  return h(
    'p',
    { class: 'note scale-needed' },
    `This slide has no scale, which ${needs}: set `,
    edit,
    ' under Edit.',
  );
}

/**
 * Markers from `/markers`, the dry-run price and balance, submit, then the job's live stream.
 * A slide without a scale gets Price and Submit once `scaleSet` says one was saved (the
 * service refuses both before with `mpp_required`).
 */
async function predictPanel(
  sps: SpsClient,
  sample: Sample,
  reload: () => void,
  jobs: { refresh: () => Promise<void>; show: (jobId: string, event: JobEvent) => void },
  signal: AbortSignal,
): Promise<{ panel: HTMLElement; scaleSet(): void }> {
  const panel = h(
    'section',
    { 'aria-labelledby': 'predict-title' },
    h('h2', { id: 'predict-title' }, 'Predict'),
  );
  // A prediction may go in once every byte is: it then waits for the sample (DECISIONS.md).
  const early = preparingSampleStatuses.has(sample.status);
  if (sample.status !== 'ready' && !early) {
    const why = failedSampleStatuses.has(sample.status)
      ? 'This sample could not be prepared (Details says why), so it cannot be predicted.'
      : 'A prediction can be submitted once every byte of the upload is in.';
    panel.append(h('p', {}, why));
    return { panel, scaleSet: () => {} };
  }
  const unscaled = sample.mpp === null;
  if (unscaled) panel.append(scaleNeeded('pricing and prediction need'));
  if (early)
    panel.append(
      h(
        'p',
        { id: 'prepared-first', class: 'note' },
        'The sample is still being prepared, so there is no exact price yet. A job submitted now reserves an upper bound, settles to the exact price once the tissue is found, and runs when the sample is ready.',
      ),
    );
  const catalog = await sps.markers.list();
  const status = h('p', { role: 'alert', hidden: true, class: 'field-error' });
  const price = h('p', { id: 'price', role: 'status' });
  const progress = h('progress', {
    id: 'job-progress',
    max: 1,
    value: 0,
    hidden: true,
    'aria-label': 'Job progress',
  });
  const jobState = h('p', { id: 'job-state', role: 'status' });
  const picker = h(
    'fieldset',
    { class: 'markers' },
    h('legend', {}, `Markers (${catalog.count} available)`),
    ...catalog.markers.map((marker) =>
      h(
        'label',
        { class: 'check' },
        h('input', { type: 'checkbox', name: 'marker', value: marker.name }),
        ` ${marker.name}`,
      ),
    ),
  );
  const chosen = () =>
    [...picker.querySelectorAll<HTMLInputElement>('input[name="marker"]:checked')].map(
      (input) => input.value,
    );
  const cancel = h('button', { type: 'button', hidden: true }, 'Cancel job');
  const follow = async (jobId: string) => {
    progress.hidden = false;
    cancel.hidden = false;
    cancel.onclick = pressed(() => sps.jobs.cancel(jobId), status);
    for await (const event of streamJob(sps, jobId, { signal })) {
      progress.value = event.progress ?? 0;
      jobState.replaceChildren(
        'Job ',
        badge(event.status),
        event.progress === null ? '' : ` ${percent(event.progress)}`,
      );
      jobs.show(jobId, event);
    }
    // A page drawn again (after a reload) follows the job itself: this panel is gone.
    if (signal.aborted) return;
    cancel.hidden = true;
    reload();
  };
  /** A job's stream followed to its end; a broken stream is said beside the buttons. */
  const followed = (jobId: string) => void follow(jobId).catch((err) => showError(err, status));
  const actions = h(
    'div',
    { class: 'actions' },
    // A dry run prices exactly, which only a ready sample can be.
    early
      ? null
      : h(
          'button',
          {
            type: 'button',
            hidden: unscaled,
            onclick: pressed(async () => {
              const estimate = await sps.predictions.estimate({ uploadId: sample.id, markers: chosen() });
              price.textContent = `${estimate.estimatedCredits} credits for ${estimate.patchCount} patches × ${estimate.markerCount} markers; balance ${estimate.orgBalance} (${estimate.orgPending} pending).`;
            }, status),
          },
          'Price',
        ),
    h(
      'button',
      {
        type: 'button',
        hidden: unscaled,
        onclick: pressed(async () => {
          const job = await sps.predictions.submit({ uploadId: sample.id, markers: chosen() });
          jobState.textContent = `Job queued, ${job.reservedCredits} credits reserved.`;
          // The new job belongs in the history now, not only once it ends.
          await jobs.refresh();
          followed(job.jobId);
        }, status),
      },
      'Submit prediction',
    ),
    cancel,
  );
  panel.append(picker, actions, price, status, progress, jobState);
  // A job still running when the page opens (a reload, a second tab) is followed as well.
  const running = sample.jobs.find((job) => !isTerminalJobStatus(job.status));
  if (running) followed(running.id);
  return {
    panel,
    scaleSet: () => {
      for (const button of actions.querySelectorAll('button')) if (button !== cancel) button.hidden = false;
    },
  };
}

/** The viewer's section when its code could not be fetched (the network, or a newer deployment). */
function viewerUnavailable(section: HTMLElement, err: unknown): void {
  const why = h('p', { role: 'alert', class: 'field-error' });
  section.replaceChildren(h('h2', { id: 'viewer-title' }, 'Viewer'), why);
  const cause = err instanceof Error ? err.message : String(err);
  showError(new Error(`the viewer could not be loaded; reload the page to try again (${cause})`), why);
}

/** How often a sample still uploading or being prepared is asked for again. */
const INGEST_POLL_MS = 3000;

/**
 * A sample on its way to ready (its bytes still going up, in another tab or from `sps`, or
 * being prepared) is asked for again while its page is drawn; the page is drawn again when its
 * status moves, so that it becomes ready (viewer, price) or says why it failed without a reload.
 */
function followIngest(sps: SpsClient, sample: Sample, signal: AbortSignal, reload: () => void): void {
  if (settledSampleStatuses.has(sample.status)) return;
  const check = async () => {
    const now = await sps.samples.get(sample.id).catch(() => undefined);
    if (signal.aborted) return;
    if (now && now.status !== sample.status) reload();
    else setTimeout(check, INGEST_POLL_MS);
  };
  setTimeout(check, INGEST_POLL_MS);
}

/** What work elsewhere (`sps`, the SDK, another tab) changes on a sample and its page draws. */
function outsideWork(sample: Sample): string {
  const jobs = sample.jobs.map((job) => `${job.id}:${job.status}`);
  return JSON.stringify([sample.status, sample.trashedAt, sample.segmentation.status, jobs]);
}

/**
 * Back on the page's tab, the sample is asked for again, and the page drawn again when a job,
 * its segmentation, status or Trash state changed meanwhile (a prediction started from `sps`
 * appears; unsaved edits are kept otherwise).
 */
function refreshOnReturn(sps: SpsClient, sample: Sample, signal: AbortSignal, reload: () => void): void {
  const shown = outsideWork(sample);
  whenShownAgain(async () => {
    const now = await sps.samples.get(sample.id).catch(() => undefined);
    if (!signal.aborted && now && outsideWork(now) !== shown) reload();
  }, signal);
}

/** The streams the page as drawn follows, stopped when it is drawn again. */
let drawn = new AbortController();

async function render(sps: SpsClient, id: string): Promise<void> {
  const next = new AbortController();
  const { signal } = next;
  const content = h('div', { id: 'sample' });
  const reload = () => void render(sps, id);
  try {
    const [sample, definitions] = await Promise.all([
      sps.samples.get(id),
      sps.samples.fields().then((list) => list.fields),
    ]);
    const failure = await ingestFailure(sps, sample);
    document.title = `${sample.name ?? sample.filename} · Slide Prediction Service`;
    main().querySelector('h1')!.textContent = sample.name ?? sample.filename;
    const details = h(
      'section',
      { 'aria-labelledby': 'details-title' },
      h('h2', { id: 'details-title' }, 'Details'),
    );
    const paint = (current: Sample) =>
      details.replaceChildren(h('h2', { id: 'details-title' }, 'Details'), metadata(current, failure));
    paint(sample);
    const jobs = h('section', { 'aria-labelledby': 'jobs-title' });
    const paintJobs = (current: Sample) =>
      jobs.replaceChildren(h('h2', { id: 'jobs-title' }, 'Job history'), jobHistory(current));
    paintJobs(sample);
    const autoStart = await startsOnceScaled(sps, sample);
    const segmentation = segmentationSection(sps, sample, {
      autoStart,
      scaleNeeded: () =>
        scaleNeeded(
          autoStart ? 'segmentation needs (it starts by itself once one is saved)' : 'segmentation needs',
        ),
      completed: reload,
    });
    const predict = await predictPanel(
      sps,
      sample,
      reload,
      {
        refresh: async () => paintJobs(await sps.samples.get(id)),
        show: (jobId, event) => showJobEvent(jobs, jobId, event),
      },
      signal,
    );
    const viewer = h('section', { id: 'viewer', 'aria-labelledby': 'viewer-title' });
    const viewerCode = import('./viewer');
    void viewerCode.then(
      ({ mountViewer }) => mountViewer(viewer, sps, sample),
      (err: unknown) => viewerUnavailable(viewer, err),
    );
    let viewerMpp = sample.mpp;
    // What a sample is for first (look, predict, follow, segment, export), then its upkeep.
    content.append(
      details,
      viewer,
      predict.panel,
      jobs,
      segmentation.section,
      exportsSection(sps, sample.jobs),
      h(
        'section',
        { 'aria-labelledby': 'edit-title' },
        h('h2', { id: 'edit-title' }, 'Edit'),
        editForm(sps, sample, definitions, (updated) => {
          paint(updated);
          const rescaled = updated.mpp !== viewerMpp;
          if (rescaled) {
            const before = viewerMpp;
            viewerMpp = updated.mpp;
            void viewerCode.then(
              ({ mountRescaledViewer }) => mountRescaledViewer(viewer, sps, updated, before),
              (err: unknown) => viewerUnavailable(viewer, err),
            );
          }
          if (updated.mpp !== null) {
            for (const note of main().querySelectorAll('.scale-needed')) note.remove();
            predict.scaleSet();
            segmentation.scaleSet(rescaled);
          }
          main().querySelector('h1')!.textContent = updated.name ?? updated.filename;
        }),
      ),
      h(
        'section',
        { 'aria-labelledby': 'expiration-title' },
        h('h2', { id: 'expiration-title' }, 'Expiration'),
        sampleExpiration(sps, sample, reload),
      ),
      h(
        'section',
        { 'aria-labelledby': 'trash-title' },
        h('h2', { id: 'trash-title' }, 'Trash'),
        trashControls(sps, sample, reload),
      ),
    );
    clearError();
    followIngest(sps, sample, signal, reload);
    refreshOnReturn(sps, sample, signal, reload);
  } catch (err) {
    showError(err);
    if (isSpsError(err, 'not_found'))
      content.append(
        h(
          'p',
          {},
          'No sample of your organization has this id: it may have been deleted, or the link may be for another organization. ',
          h('a', { href: 'samples' }, 'Go to the samples'),
          '.',
        ),
      );
    // A page drawn again keeps what it showed (and follows) when its reload fails, and shows
    // why where it is said (the action that asked for it may be a screen further down).
    if (main().querySelector('#sample')) {
      next.abort();
      document.getElementById('status')?.scrollIntoView({ block: 'nearest' });
      return;
    }
  }
  drawn.abort();
  drawn = next;
  main().querySelector('#sample')?.remove();
  main().append(content);
}

const sps = client();
if (sps) void render(sps, sampleId());
else needKey();
