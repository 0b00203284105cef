import './account';
import { blobSource, type SpsClient, type UploadSession, uploadSource } from '../../sdk';
import { badge, bytes, h, main, needKey, showError } from './dom';
import { client } from './session';

/** Statuses after which ingest moves no further. */
const settled = new Set(['ready', 'upload_failed', 'deid_failed', 'preprocess_failed']);
const POLL_MS = 3000;

/**
 * A file's resumable session, per tab: a reload of the page picks the same file up where the
 * service's `Range` says it stopped instead of starting over.
 */
function sessionKey(file: File): string {
  return `sps.upload:${file.name}:${file.size}:${file.lastModified}`;
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

async function follow(sps: SpsClient, uploadId: string, state: HTMLElement): Promise<void> {
  for (;;) {
    const upload = await sps.uploads.get(uploadId);
    state.replaceChildren(badge(upload.status));
    if (settled.has(upload.status)) {
      state.append(' ', h('a', { href: `samples/${upload.id}` }, 'Open sample'));
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

async function uploadOne(sps: SpsClient, file: File, list: HTMLElement, autoSegment: boolean): Promise<void> {
  const progress = h('progress', { max: file.size, value: 0, 'aria-label': `Upload of ${file.name}` });
  const figures = h('span', { class: 'figures' }, `0 B of ${bytes(file.size)}`);
  const state = h('span', { class: 'upload-state', role: 'status' }, 'starting');
  const error = h('p', { role: 'alert', hidden: true, class: 'field-error' });
  list.append(h('li', { class: 'upload' }, h('strong', {}, file.name), progress, figures, state, error));
  const startedAt = performance.now();
  try {
    const upload = await uploadSource(sps, blobSource(file), {
      contentType: file.type || 'application/octet-stream',
      autoSegment,
      resume: rememberedSession(file),
      onSession: (session) => sessionStorage.setItem(sessionKey(file), JSON.stringify(session)),
      onProgress: ({ sentBytes, totalBytes, resumedFrom }) => {
        progress.value = sentBytes;
        state.textContent = resumedFrom > 0 ? `resumed at ${bytes(resumedFrom)}` : 'uploading';
        figures.textContent = `${bytes(sentBytes)} of ${bytes(totalBytes)}${rate(sentBytes - resumedFrom, startedAt, totalBytes - resumedFrom)}`;
      },
    });
    sessionStorage.removeItem(sessionKey(file));
    progress.value = file.size;
    await follow(sps, upload.id, state);
  } catch (err) {
    state.textContent = 'failed';
    showError(err, error);
  }
}

function start(sps: SpsClient): void {
  const list = h('ul', { class: 'uploads', 'aria-label': 'Uploads' });
  const input = h('input', { id: 'files', type: 'file', multiple: true });
  const segment = h('input', { id: 'auto-segment', type: 'checkbox', checked: true });
  const send = (files: FileList | null) => {
    for (const file of files ?? []) void uploadOne(sps, file, list, segment.checked);
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
  );
  zone.addEventListener('dragover', (event) => {
    event.preventDefault();
    zone.classList.add('over');
  });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (event) => {
    event.preventDefault();
    zone.classList.remove('over');
    send(event.dataTransfer?.files ?? null);
  });
  main().append(
    zone,
    h('label', { class: 'check' }, segment, ' Segment cells once each slide is ready'),
    list,
  );
}

const sps = client();
if (sps) start(sps);
else needKey();
