import './account';
import type { SpsClient } from '../../sdk';
import { clearError, h, main, needKey, showError } from './dom';
import { client } from './session';

/** The public id from `/public/samples/{publicId}`. */
function publicId(): string {
  return decodeURIComponent(location.pathname.replace(/\/+$/, '').split('/').pop() ?? '');
}

/**
 * A public cohort sample's `appUrl`: its thumbnail (read through the SDK, a bearer header, so
 * not an `<img src>` of the API, and shown from a blob URL) and the viewer of its H&E and
 * pinned markers. Read-only, and free: any organization's credential reads it.
 */
async function render(sps: SpsClient, id: string): Promise<void> {
  try {
    const response = await sps.publicSamples.thumbnail(id);
    const image = h('img', {
      id: 'thumbnail',
      src: URL.createObjectURL(await response.blob()),
      alt: `Thumbnail of public sample ${id}`,
    });
    const viewer = h('section', { id: 'viewer', 'aria-labelledby': 'viewer-title' });
    main().append(
      h('p', {}, `Public sample ${id}: read-only, and reading it spends no credits.`),
      image,
      viewer,
    );
    clearError();
    const { mountPublicViewer } = await import('./viewer');
    await mountPublicViewer(viewer, sps, id);
  } catch (err) {
    showError(err);
  }
}

const sps = client();
if (sps) void render(sps, publicId());
else needKey();
