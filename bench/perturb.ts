import sharp from 'sharp';
import type { RgbImage } from '../compute/image';
import {
  densityOfValue,
  RUIFROK_STAINS,
  unit,
  unmixingColumns,
  type Vector,
} from '../compute/segmentation/stain';

/**
 * Controlled changes to an annotated H&E tile that mimic another lab or scanner, for the
 * robustness table of bench/segmentation-quality.ts. Stain changes unmix each pixel with
 * Ruifrok & Johnston's vectors and mix it again with other vectors or amounts, the residual
 * kept, so only the stains change; the others act on the RGB image as a scanner would.
 */

export interface Perturbation {
  name: string;
  /** The tile changed; `halve` also halves the reference labels and doubles the mpp. */
  apply(image: RgbImage): Promise<RgbImage> | RgbImage;
  halve?: boolean;
}

/** `v` turned by `degrees` towards `target` in the plane they span, unit length. */
function turnedTowards(v: Vector, target: Vector, degrees: number): Vector {
  const a = unit(v);
  const dot = a[0] * target[0] + a[1] * target[1] + a[2] * target[2];
  const ortho = unit([target[0] - dot * a[0], target[1] - dot * a[1], target[2] - dot * a[2]]);
  const t = (degrees * Math.PI) / 180;
  return unit([
    a[0] * Math.cos(t) + ortho[0] * Math.sin(t),
    a[1] * Math.cos(t) + ortho[1] * Math.sin(t),
    a[2] * Math.cos(t) + ortho[2] * Math.sin(t),
  ]);
}

/** Each pixel unmixed with the reference stains and remixed as `h H' + e E' + r R`. */
function restain(
  image: RgbImage,
  { hematoxylin, eosin, h = 1, e = 1 }: { hematoxylin: Vector; eosin: Vector; h?: number; e?: number },
): RgbImage {
  const [hw, ew] = unmixingColumns(RUIFROK_STAINS);
  const { hematoxylin: h0, eosin: e0 } = RUIFROK_STAINS;
  const data = new Uint8Array(image.data.length);
  for (let p = 0; p < data.length; p += 3) {
    const od = [
      densityOfValue[image.data[p]!]!,
      densityOfValue[image.data[p + 1]!]!,
      densityOfValue[image.data[p + 2]!]!,
    ];
    const hd = od[0]! * hw[0] + od[1]! * hw[1] + od[2]! * hw[2];
    const ed = od[0]! * ew[0] + od[1]! * ew[1] + od[2]! * ew[2];
    for (let c = 0; c < 3; c++) {
      const residual = od[c]! - hd * h0[c]! - ed * e0[c]!;
      const out = h * hd * hematoxylin[c]! + e * ed * eosin[c]! + residual;
      data[p + c] = Math.min(255, Math.max(0, Math.round(256 * 10 ** -out - 1)));
    }
  }
  return { data, width: image.width, height: image.height };
}

async function viaSharp(image: RgbImage, edit: (s: sharp.Sharp) => sharp.Sharp): Promise<RgbImage> {
  const { width, height } = image;
  const input = sharp(Buffer.from(image.data), { raw: { width, height, channels: 3 } });
  const { data } = await sharp(await edit(input).toBuffer())
    .removeAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  return { data: new Uint8Array(data), width, height };
}

/** 2 x 2 block means: what a scanner's 20x level or a pyramid level would hold. */
export function halveImage(image: RgbImage): RgbImage {
  const width = image.width >> 1;
  const height = image.height >> 1;
  const data = new Uint8Array(width * height * 3);
  const src = image.data;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      for (let c = 0; c < 3; c++) {
        const a = (2 * y * image.width + 2 * x) * 3 + c;
        const b = a + image.width * 3;
        data[(y * width + x) * 3 + c] = Math.round((src[a]! + src[a + 3]! + src[b]! + src[b + 3]!) / 4);
      }
    }
  }
  return { data, width, height };
}

/** The top-left label of each 2 x 2 block: ids survive, as nearest-neighbour downsampling keeps them. */
export function halveLabels(labels: Uint16Array, width: number, height: number): Uint16Array {
  const w = width >> 1;
  const h = height >> 1;
  const out = new Uint16Array(w * h);
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) out[y * w + x] = labels[2 * y * width + 2 * x]!;
  return out;
}

const { hematoxylin: H, eosin: E } = RUIFROK_STAINS;
const BLUE: Vector = [0, 0, 1];
const RED: Vector = [1, 0, 0];

/** The perturbations of the robustness table, the unperturbed tile first. */
export function perturbations(mpp: number): Perturbation[] {
  return [
    { name: 'none', apply: (image) => image },
    {
      name: 'stains rotated 15°',
      // A redder haematoxylin and a bluer eosin: the two stains move towards each other.
      apply: (image) =>
        restain(image, { hematoxylin: turnedTowards(H, RED, 15), eosin: turnedTowards(E, BLUE, 15) }),
    },
    {
      name: 'stains scaled (H x1.3, E x0.6)',
      apply: (image) => restain(image, { hematoxylin: H, eosin: E, h: 1.3, e: 0.6 }),
    },
    { name: 'hematoxylin 70 %', apply: (image) => restain(image, { hematoxylin: H, eosin: E, h: 0.7 }) },
    { name: 'hematoxylin 40 %', apply: (image) => restain(image, { hematoxylin: H, eosin: E, h: 0.4 }) },
    {
      name: 'blur sigma 0.5 µm',
      apply: (image) => viaSharp(image, (s) => s.blur(Math.max(0.3, 0.5 / mpp)).png()),
    },
    { name: 'JPEG q70', apply: (image) => viaSharp(image, (s) => s.jpeg({ quality: 70 })) },
    { name: 'downsampled to 0.5 µm', apply: halveImage, halve: true },
    {
      // A faint 20x slide: the case issue 24's held-out tiles lost most on.
      name: 'hematoxylin 40 %, 0.5 µm',
      apply: (image) => halveImage(restain(image, { hematoxylin: H, eosin: E, h: 0.4 })),
      halve: true,
    },
  ];
}
