import './account';
import type { SpsClient } from '../../sdk';
import { clearError, h, main, needKey, showError } from './dom';
import { client } from './session';

/** The public id from `/public/samples/{publicId}`. */
function publicId(): string {
  return decodeURIComponent(location.pathname.replace(/\/+$/, '').split('/').pop() ?? '');
}

/**
 * A public cohort sample's `appUrl`: its thumbnail, read through the SDK (a bearer header, so
 * not an `<img src>` of the API) and shown from a blob URL.
 */
async function render(sps: SpsClient, id: string): Promise<void> {
  try {
    const response = await sps.publicSamples.thumbnail(id);
    const image = h('img', {
      id: 'thumbnail',
      src: URL.createObjectURL(await response.blob()),
      alt: `Thumbnail of public sample ${id}`,
    });
    main().append(h('p', {}, `Public sample ${id} (read-only; the slide viewer comes later).`), image);
    clearError();
  } catch (err) {
    showError(err);
  }
}

const sps = client();
if (sps) void render(sps, publicId());
else needKey();
