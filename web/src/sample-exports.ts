import { type ExportFormat, exportFormats } from '../../schemas/exports';
import type { SpsClient } from '../../sdk';
import { badge, bytes, h, pressed, showError, when } from './dom';

type Manifest = Awaited<ReturnType<SpsClient['exports']['get']>>;
type Job = {
  id: string;
  status: string;
  markers: string[];
  resultsAvailable: boolean;
  createdAt: string | null;
};

const POLL_MS = 3000;

function link(label: string, url: string, size?: number): HTMLElement {
  return h(
    'li',
    {},
    h('a', { href: url, download: '', rel: 'noreferrer' }, label),
    size === undefined ? '' : ` (${bytes(size)})`,
  );
}

/** Every link of a ready manifest: the files, the stores' roots, the layer's tables, the source. */
function links(manifest: Manifest): HTMLElement {
  const { prediction, he, segmentation, originalUpload } = manifest.artifacts;
  const items: HTMLElement[] = [];
  if (prediction?.converted && prediction.downloadUrl)
    items.push(link(`Download the ${manifest.format} file`, prediction.downloadUrl, prediction.sizeBytes));
  if (prediction && !prediction.converted)
    items.push(link('Prediction store (zarr.json)', prediction.rootUrl));
  if (he && !prediction?.includesHe) items.push(link('H&E store (zarr.json)', he.rootUrl));
  if (segmentation) {
    const { downloads } = segmentation;
    items.push(
      link('Cell morphology (Parquet)', downloads.morphology.downloadUrl, downloads.morphology.sizeBytes),
    );
    for (const marker of downloads.markers)
      items.push(link(`Cell expression of ${marker.marker} (Parquet)`, marker.downloadUrl, marker.sizeBytes));
    const { outlines, anndata } = downloads;
    if (outlines) {
      const { geojson, geoparquet } = outlines;
      items.push(link('Cell outlines for QuPath (GeoJSON)', geojson.downloadUrl, geojson.sizeBytes));
      items.push(link('Cell outlines (GeoParquet)', geoparquet.downloadUrl, geoparquet.sizeBytes));
    }
    if (anndata) items.push(link('Cells for scanpy (AnnData .h5ad)', anndata.downloadUrl, anndata.sizeBytes));
    items.push(link('Segmentation provenance (JSON)', downloads.provenance.downloadUrl));
  }
  if (originalUpload)
    items.push(
      link(
        `Original upload ${originalUpload.filename}`,
        originalUpload.downloadUrl,
        originalUpload.sizeBytes,
      ),
    );
  return h('ul', { class: 'links', id: 'export-links' }, ...items);
}

/**
 * Exports of one of the sample's finished predictions: format and contents chosen, the export
 * requested, its state followed to `ready` or `failed`, then its links (short-lived: a fresh
 * GET signs them again, which the page does each time it shows them).
 */
export function exportsSection(sps: SpsClient, jobs: Job[]): HTMLElement {
  const section = h(
    'section',
    { 'aria-labelledby': 'exports-title' },
    h('h2', { id: 'exports-title' }, 'Exports'),
  );
  const finished = jobs.filter((job) => job.resultsAvailable);
  if (finished.length === 0) {
    section.append(h('p', {}, 'Exports need a prediction with results.'));
    return section;
  }
  const job = h(
    'select',
    { id: 'export-job' },
    ...finished.map((candidate) =>
      h('option', { value: candidate.id }, `${candidate.markers.join(', ')} · ${when(candidate.createdAt)}`),
    ),
  );
  const format = h(
    'select',
    { id: 'export-format' },
    ...exportFormats.map((name) => h('option', { value: name }, name)),
  );
  const flag = (id: string, label: string) =>
    h('label', { class: 'check' }, h('input', { id, type: 'checkbox' }), ` ${label}`);
  const options = h(
    'fieldset',
    {},
    h('legend', {}, 'Include'),
    flag('include-he', 'H&E'),
    flag('include-segmentation', 'Cell segmentation'),
    flag('include-original', 'Original upload'),
  );
  const state = h('p', { id: 'export-state', role: 'status', class: 'section-state' });
  const error = h('p', { id: 'export-error', role: 'alert', class: 'field-error', hidden: true });
  const output = h('div', {});
  let timer: ReturnType<typeof setTimeout> | undefined;

  const selection = () => ({
    format: format.value as ExportFormat,
    includeHe: section.querySelector<HTMLInputElement>('#include-he')!.checked,
    includeSegmentation: section.querySelector<HTMLInputElement>('#include-segmentation')!.checked,
    includeOriginalUpload: section.querySelector<HTMLInputElement>('#include-original')!.checked,
  });
  const paint = (jobId: string, chosen: ReturnType<typeof selection>, manifest: Manifest) => {
    state.replaceChildren(
      `Export ${manifest.format} `,
      badge(manifest.status),
      ` · links valid until ${when(manifest.expiresAt)}`,
    );
    output.replaceChildren();
    if (manifest.status === 'failed') showError(new Error(manifest.error ?? 'the export failed'), error);
    if (manifest.status === 'ready') output.append(links(manifest));
    clearTimeout(timer);
    if (manifest.status === 'pending' || manifest.status === 'running')
      timer = setTimeout(async () => {
        try {
          const text = (flag: boolean) => (flag ? ('true' as const) : ('false' as const));
          const query = {
            format: chosen.format,
            includeHe: text(chosen.includeHe),
            includeSegmentation: text(chosen.includeSegmentation),
            includeOriginalUpload: text(chosen.includeOriginalUpload),
          };
          paint(jobId, chosen, await sps.exports.get(jobId, query));
        } catch (err) {
          showError(err, error);
        }
      }, POLL_MS);
  };
  const request = h('button', { type: 'button' }, 'Request export');
  request.addEventListener(
    'click',
    pressed(async () => {
      const chosen = selection();
      paint(job.value, chosen, await sps.exports.request(job.value, chosen));
    }, error),
  );
  section.append(
    h('div', { class: 'field' }, h('label', { for: 'export-job' }, 'Prediction'), job),
    h('div', { class: 'field' }, h('label', { for: 'export-format' }, 'Format'), format),
    options,
    h('div', { class: 'actions' }, request),
    state,
    error,
    output,
  );
  return section;
}
