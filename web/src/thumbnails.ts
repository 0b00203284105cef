import * as zarr from 'zarrita';
import { openSampleHe, type SpsClient } from '../../sdk';
import './zarr-codecs';

const WIDTH = 96;
const HEIGHT = 72;
/** Thumbnails read at once: each is a few requests, and the list may hold a hundred rows. */
const PARALLEL = 3;

/**
 * Paints a canvas from the lowest level of the sample's H&E pyramid (the authenticated store
 * the SDK opens): the service has no thumbnail endpoint for owned samples, and the smallest
 * level is a few hundred pixels, so one read is all it takes.
 */
async function paintHe(sps: SpsClient, sampleId: string, canvas: HTMLCanvasElement): Promise<void> {
  const store = await openSampleHe(sps, sampleId);
  const [name, levels] = [...store.multiscales.entries()][0] ?? [];
  if (name === undefined || !levels?.length) throw new Error('the H&E store has no image');
  const level = await store.open(name, levels.length - 1);
  const { data, shape } = await zarr.get(level);
  const [channels, height, width] = shape as [number, number, number];
  const pixels = data as Uint8Array;
  const rgba = new Uint8ClampedArray(width * height * 4);
  const plane = width * height;
  for (let i = 0; i < plane; i++) {
    for (let c = 0; c < 3; c++) rgba[i * 4 + c] = pixels[(channels > c ? c : 0) * plane + i]!;
    rgba[i * 4 + 3] = 255;
  }
  const full = new OffscreenCanvas(width, height);
  full.getContext('2d')!.putImageData(new ImageData(rgba, width, height), 0, 0);
  drawFitted(canvas, full, width, height);
}

async function paintPublic(sps: SpsClient, publicId: string, canvas: HTMLCanvasElement): Promise<void> {
  const response = await sps.publicSamples.thumbnail(publicId);
  const image = await createImageBitmap(await response.blob());
  drawFitted(canvas, image, image.width, image.height);
}

function drawFitted(
  canvas: HTMLCanvasElement,
  source: CanvasImageSource,
  width: number,
  height: number,
): void {
  const scale = Math.min(WIDTH / width, HEIGHT / height, 1);
  canvas.width = Math.max(1, Math.round(width * scale));
  canvas.height = Math.max(1, Math.round(height * scale));
  const context = canvas.getContext('2d')!;
  context.imageSmoothingQuality = 'high';
  context.drawImage(source, 0, 0, canvas.width, canvas.height);
  canvas.dataset.state = 'painted';
}

/**
 * Thumbnails drawn only for rows that scroll into view, a few at a time. A sample that is not
 * ready has no pyramid yet: its canvas stays blank until the row is drawn again.
 */
export function lazyThumbnails(sps: SpsClient) {
  const waiting: (() => Promise<void>)[] = [];
  let running = 0;
  const pump = () => {
    while (running < PARALLEL && waiting.length > 0) {
      const next = waiting.shift()!;
      running += 1;
      void next().finally(() => {
        running -= 1;
        pump();
      });
    }
  };
  const jobs = new WeakMap<Element, () => Promise<void>>();
  const observer = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (!entry.isIntersecting) continue;
      observer.unobserve(entry.target);
      const job = jobs.get(entry.target);
      if (job) waiting.push(job);
    }
    pump();
  });

  /** A canvas for one list row, painted once it is seen. */
  return function thumbnail(item: {
    id: string;
    ownership: string;
    status: string;
    name: string | null;
    filename: string;
  }) {
    const canvas = document.createElement('canvas');
    canvas.className = 'thumbnail';
    canvas.width = WIDTH;
    canvas.height = HEIGHT;
    canvas.setAttribute('role', 'img');
    canvas.setAttribute('aria-label', `Thumbnail of ${item.name ?? item.filename}`);
    if (item.ownership !== 'mine' || item.status === 'ready') {
      canvas.dataset.state = 'waiting';
      jobs.set(canvas, async () => {
        try {
          await (item.ownership === 'mine'
            ? paintHe(sps, item.id, canvas)
            : paintPublic(sps, item.id, canvas));
        } catch (err) {
          // A missing picture is not an error of the list (the row still says everything):
          // the reason goes in the tooltip.
          canvas.dataset.state = 'unavailable';
          canvas.title = err instanceof Error ? err.message : String(err);
        }
      });
      observer.observe(canvas);
    }
    return canvas;
  };
}
