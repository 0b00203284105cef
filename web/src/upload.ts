import './account';
import { MppInput, typedNumber } from '../../schemas/common';
import {
  blobSource,
  type SpsClient,
  slideFileProblem,
  UPLOAD_GRANULE,
  type UploadSession,
  uploadSource,
  waitForIngest,
} from '../../sdk';
import { badge, bytes, h, main, needKey, showError } from './dom';
import { client } from './session';

const POLL_MS = 3000;

const MAX_CHUNK_BYTES = 64 * 1024 * 1024;

/**
 * About sixteen PUTs a file (whole granules, at most 64 MiB each): the bar moves in steps a
 * person can see, and a reload loses at most the chunk in flight.
 */
function chunkBytesFor(size: number): number {
  const granules = Math.max(1, Math.floor(size / 16 / UPLOAD_GRANULE));
  return Math.min(MAX_CHUNK_BYTES, granules * UPLOAD_GRANULE);
}

const SESSION_PREFIX = 'sps.upload:';

/**
 * A file's resumable session, per tab: a reload of the page picks the same file up where the
 * service's `Range` says it stopped instead of starting over.
 */
function sessionKey(file: File): string {
  return `${SESSION_PREFIX}${file.name}:${file.size}:${file.lastModified}`;
}

function rememberedSession(file: File): UploadSession | undefined {
  const saved = sessionStorage.getItem(sessionKey(file));
  return saved ? (JSON.parse(saved) as UploadSession) : undefined;
}

function rate(sent: number, startedAt: number, total: number): string {
  const seconds = (performance.now() - startedAt) / 1000;
  if (seconds < 0.5 || sent === 0) return '';
  const speed = sent / seconds;
  const eta = (total - sent) / speed;
  return ` · ${bytes(speed)}/s · ${Math.ceil(eta)} s left`;
}

/**
 * Follows ingest to where it stops; a failure's reason, in the service's words, goes to `reason`.
 * A slide ready without a scale (its file gave none) says what needs one and where to set it.
 */
async function follow(
  sps: SpsClient,
  uploadId: string,
  state: HTMLElement,
  reason: HTMLElement,
): Promise<void> {
  const upload = await waitForIngest(sps, uploadId, {
    intervalMs: POLL_MS,
    onUpload: (current) => state.replaceChildren(badge(current.status)),
  });
  // Asked before the link is shown, so that a row with its link has its note too.
  const unscaled =
    upload.status === 'ready' &&
    (await sps.samples.get(upload.id).then(
      (sample) => sample.mpp === null,
      () => false,
    ));
  state.append(' ', h('a', { href: `samples/${upload.id}` }, 'Open sample'));
  reason.textContent = upload.statusMessage ?? '';
  reason.hidden = upload.statusMessage === null;
  if (!unscaled) return;
  const waits = upload.autoSegment ? ' (its segmentation starts once it has one)' : '';
  state.after(
    h(
      'p',
      { class: 'note scale-needed' },
      `This slide has no scale, which prediction and segmentation need${waits}: set Microns per pixel on its sample page.`,
    ),
  );
}

/**
 * The files this tab is sending now, by session key, each with its row's note: a file chosen
 * again while its bytes go up is sent once (two sends would make two samples, or fight over one
 * session), and its row says so.
 */
const sending = new Map<string, HTMLElement>();

/** What the upload page asks of each file it sends. */
interface UploadChoices {
  autoSegment: boolean;
  /** Microns per pixel for every file chosen, in place of each file's own; none keeps theirs. */
  mpp?: number;
}

const FOLDER_DROPPED =
  "Not uploaded: this is a folder. Drop the slide files in it (a DICOM slide's level-0 instance: its largest file).";

/** Why a file is not sent, under its name in its row. */
const refusal = (why: string) => h('p', { role: 'alert', class: 'field-error' }, why);

/** The names of the folders among dropped items: the browser hands each over as a file it cannot read. */
function droppedFolders(transfer: DataTransfer | null): Set<string> {
  const entries = [...(transfer?.items ?? [])].map((item) => item.webkitGetAsEntry());
  return new Set(entries.flatMap((entry) => (entry?.isDirectory ? [entry.name] : [])));
}

async function uploadOne(
  sps: SpsClient,
  file: File,
  list: HTMLElement,
  choices: UploadChoices,
): Promise<void> {
  const key = sessionKey(file);
  const chosenAgain = sending.get(key);
  if (chosenAgain) {
    chosenAgain.hidden = false;
    return;
  }
  const again = h(
    'p',
    { class: 'note', role: 'status', hidden: true },
    'Chosen again while it uploads: it is sent once.',
  );
  sending.set(key, again);
  // The row at once, in the order the files came; what fills it waits for a first look.
  const row = h('li', { class: 'upload' }, h('strong', {}, file.name), again);
  list.append(row);
  // An empty copy, or another kind of file: said at once, and no sample that could only fail.
  const problem = await slideFileProblem(blobSource(file)).catch(
    () => 'unreadable here (moved or deleted since it was chosen?)',
  );
  if (problem) {
    sending.delete(key);
    again.replaceWith(refusal(`Not uploaded: this file is ${problem}.`));
    return;
  }
  const progress = h('progress', { max: file.size, value: 0, 'aria-label': `Upload of ${file.name}` });
  const figures = h('span', { class: 'figures' }, `0 B of ${bytes(file.size)}`);
  const state = h('span', { class: 'upload-state', role: 'status' }, 'starting');
  const error = h('p', { role: 'alert', hidden: true, class: 'field-error' });
  again.before(progress, figures, state, error);
  const startedAt = performance.now();
  try {
    const upload = await uploadSource(sps, blobSource(file), {
      contentType: file.type || 'application/octet-stream',
      ...choices,
      resume: rememberedSession(file),
      chunkBytes: chunkBytesFor(file.size),
      onSession: (session) => sessionStorage.setItem(key, JSON.stringify(session)),
      onProgress: ({ sentBytes, totalBytes, resumedFrom }) => {
        progress.value = sentBytes;
        state.textContent = resumedFrom > 0 ? `resumed at ${bytes(resumedFrom)}` : 'uploading';
        figures.textContent = `${bytes(sentBytes)} of ${bytes(totalBytes)}${rate(sentBytes - resumedFrom, startedAt, totalBytes - resumedFrom)}`;
      },
    }).finally(() => sending.delete(key));
    sessionStorage.removeItem(key);
    progress.value = file.size;
    await follow(sps, upload.id, state, error);
  } catch (err) {
    state.textContent = 'failed';
    showError(err, error);
  }
}

/**
 * Uploads this tab left unfinished (a reload, a closed network): the browser cannot reopen a
 * file by itself, so each asks for its file again, and choosing it resumes where the service's
 * `Range` says the bytes stopped.
 */
async function unfinished(sps: SpsClient, list: HTMLElement): Promise<void> {
  for (let i = 0; i < sessionStorage.length; i++) {
    const key = sessionStorage.key(i)!;
    if (!key.startsWith(SESSION_PREFIX)) continue;
    const name = key.slice(SESSION_PREFIX.length).split(':').slice(0, -2).join(':');
    const session = JSON.parse(sessionStorage.getItem(key)!) as UploadSession;
    const state = h('span', { class: 'upload-state', role: 'status' });
    list.append(
      h(
        'li',
        { class: 'upload unfinished', 'data-session': key },
        h('strong', {}, name),
        h('span', {}, 'Unfinished: choose the same file again to resume it.'),
        state,
      ),
    );
    sps.uploads.get(session.uploadId).then(
      (upload) => state.replaceChildren(badge(upload.status)),
      (err) => showError(err, state),
    );
  }
}

/**
 * An optional scale for the files chosen next (scanners whose files state none): checked by the
 * contract's own rule before any byte is sent, and said beside the field when it fails it.
 */
function scaleField(): { node: HTMLElement; value(): number | undefined | 'invalid' } {
  const input = h('input', {
    id: 'upload-mpp',
    type: 'text',
    inputmode: 'decimal',
    autocomplete: 'off',
    'aria-describedby': 'upload-mpp-hint upload-mpp-error',
  });
  const error = h('p', { id: 'upload-mpp-error', class: 'field-error', role: 'alert', hidden: true });
  const node = h(
    'div',
    { class: 'field' },
    h('label', { for: 'upload-mpp' }, 'Microns per pixel (optional)'),
    input,
    h(
      'small',
      { id: 'upload-mpp-hint' },
      "For slides whose files state no scale, or a wrong one: it replaces each file's own. Empty keeps theirs.",
    ),
    error,
  );
  const value = () => {
    const text = input.value.trim();
    error.hidden = true;
    input.removeAttribute('aria-invalid');
    if (text === '') return undefined;
    const parsed = MppInput.safeParse(typedNumber(text));
    if (parsed.success && typeof parsed.data === 'number') return parsed.data;
    error.textContent = `Microns per pixel: "${text}" is not a number greater than 0 and at most 100; nothing was sent.`;
    error.hidden = false;
    input.setAttribute('aria-invalid', 'true');
    input.focus();
    return 'invalid';
  };
  return { node, value };
}

function start(sps: SpsClient): void {
  const list = h('ul', { class: 'uploads', 'aria-label': 'Uploads' });
  const input = h('input', { id: 'files', type: 'file', multiple: true });
  const segment = h('input', { id: 'auto-segment', type: 'checkbox', checked: true });
  const scale = scaleField();
  const send = (files: FileList | null, folders = new Set<string>()) => {
    const mpp = scale.value();
    if (mpp === 'invalid') return;
    for (const file of files ?? []) {
      if (folders.has(file.name)) {
        list.append(h('li', { class: 'upload' }, h('strong', {}, file.name), refusal(FOLDER_DROPPED)));
        continue;
      }
      list.querySelector(`li[data-session="${CSS.escape(sessionKey(file))}"]`)?.remove();
      void uploadOne(sps, file, list, {
        autoSegment: segment.checked,
        ...(mpp === undefined ? {} : { mpp }),
      });
    }
  };
  input.addEventListener('change', () => {
    send(input.files);
    input.value = '';
  });
  const zone = h(
    'div',
    { class: 'drop-zone', id: 'drop-zone' },
    h('p', {}, 'Drop slides here, or'),
    h('label', { for: 'files', class: 'button' }, 'Choose slide files'),
    input,
    h(
      'p',
      { class: 'hint' },
      "Whole-slide images: SVS, NDPI, OME-TIFF and other pyramidal TIFF, or DICOM WSI (each slide's level-0 instance: its largest file).",
    ),
  );
  zone.addEventListener('dragover', (event) => {
    event.preventDefault();
    zone.classList.add('over');
  });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (event) => {
    event.preventDefault();
    zone.classList.remove('over');
    send(event.dataTransfer?.files ?? null, droppedFolders(event.dataTransfer));
  });
  main().append(
    zone,
    h('p', {}, h('label', { class: 'check' }, segment, ' Segment cells once each slide is ready')),
    scale.node,
    list,
  );
  void unfinished(sps, list);
}

const sps = client();
if (sps) start(sps);
else needKey();
