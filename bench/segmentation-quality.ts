import path from 'node:path';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import type { RgbImage } from '../compute/image';
import {
  createClassicalSegmenter,
  createOnnxSegmenter,
  type SegmentationQuality,
  type Segmenter,
  segmentationQuality,
} from '../compute/segmentation';
import { segmentationModelSpec } from '../models/registry';

/**
 * Nucleus segmentation quality and speed on the annotated MoNuSeg tiles of the shared test data
 * (../shared/data/nuclei/SOURCES.md): detection F1 at IoU 0.5, the mean IoU of matched pairs and
 * the Aggregated Jaccard Index (Kumar et al. 2017), per image, for the classical segmenter and the
 * ONNX segmenter with the bundled (untrained) baseline model. Each tile is also scored at 0.5
 * µm/px (image and labels halved), the scale of 20x slides, to check that the parameters in
 * microns carry over. Times are of warm single-threaded runs on this machine.
 *
 *   npm run bench:segmentation-quality [-- --repeat 3]
 */
const { values } = parseArgs({ options: { repeat: { type: 'string', default: '3' } } });
const repeat = Math.max(1, Number(values.repeat));
const dataDir = path.join(__dirname, '..', '..', '..', 'shared', 'data', 'nuclei', 'monuseg');

/** Scale from each tile's XML `MicronsPerPixel`. */
const tiles = [
  { name: 'TCGA-2Z-A9J9-01A-01-TS1', mpp: 0.2527 },
  { name: 'TCGA-A6-6782-01A-01-BS1', mpp: 0.2457 },
];

/** A figure quoted for a classical watershed on MoNuSeg; we did not re-run it. */
const literature = { label: 'classical watershed, literature (as quoted in issue 6)', f1: 0.27, aji: 0.08 };

interface Case {
  name: string;
  mpp: number;
  image: RgbImage;
  reference: Uint16Array;
}

async function readCase(name: string, mpp: number, halve: boolean): Promise<Case> {
  const rgb = await sharp(path.join(dataDir, `${name}.tif`))
    .removeAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  const labels = await sharp(path.join(dataDir, `${name}_label.png`))
    .toColourspace('grey16')
    .raw({ depth: 'ushort' })
    .toBuffer({ resolveWithObject: true });
  let image: RgbImage = { data: new Uint8Array(rgb.data), width: rgb.info.width, height: rgb.info.height };
  let reference: Uint16Array = new Uint16Array(
    labels.data.buffer,
    labels.data.byteOffset,
    labels.data.length / 2,
  );
  if (halve) {
    image = halveImage(image);
    reference = halveLabels(reference, rgb.info.width, rgb.info.height);
  }
  return { name: halve ? `${name} @0.5` : name, mpp: halve ? mpp * 2 : mpp, image, reference };
}

/** 2 x 2 block means: what a scanner's 20x level or a pyramid level would hold. */
function halveImage(image: RgbImage): RgbImage {
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
function halveLabels(labels: Uint16Array, width: number, height: number): Uint16Array {
  const w = width >> 1;
  const h = height >> 1;
  const out = new Uint16Array(w * h);
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) out[y * w + x] = labels[2 * y * width + 2 * x]!;
  return out;
}

interface Row {
  segmenter: string;
  tile: string;
  quality: SegmentationQuality;
  ms: number;
  megapixels: number;
}

async function score(segmenter: Segmenter, label: string, c: Case): Promise<Row> {
  const first = await segmenter.segment(c.image, c.mpp);
  let best = Number.POSITIVE_INFINITY;
  for (let k = 0; k < repeat; k++) {
    const start = performance.now();
    await segmenter.segment(c.image, c.mpp);
    best = Math.min(best, performance.now() - start);
  }
  return {
    segmenter: label,
    tile: c.name,
    quality: segmentationQuality(c.reference, first.nuclei.labels),
    ms: best,
    megapixels: (c.image.width * c.image.height) / 1e6,
  };
}

const f3 = (v: number) => v.toFixed(3);

function printRows(rows: Row[]): void {
  console.log(['segmenter', 'tile', 'ref', 'pred', 'P', 'R', 'F1', 'mIoU', 'AJI', 'ms', 'Mpx/s'].join('\t'));
  for (const r of rows) {
    const q = r.quality;
    console.log(
      [
        r.segmenter,
        r.tile,
        q.reference,
        q.predicted,
        f3(q.precision),
        f3(q.recall),
        f3(q.f1),
        f3(q.meanMatchedIou),
        f3(q.aji),
        r.ms.toFixed(0),
        (r.megapixels / (r.ms / 1000)).toFixed(2),
      ].join('\t'),
    );
  }
}

function printMeans(rows: Row[]): void {
  const groups = new Map<string, Row[]>();
  for (const r of rows) {
    const key = `${r.segmenter}${r.tile.endsWith('@0.5') ? ' @0.5' : ''}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  console.log('\nmean over tiles\tF1\tmIoU\tAJI\tMpx/s');
  for (const [key, group] of groups) {
    const mean = (f: (r: Row) => number) => group.reduce((s, r) => s + f(r), 0) / group.length;
    const speed = group.reduce((s, r) => s + r.megapixels, 0) / (group.reduce((s, r) => s + r.ms, 0) / 1000);
    console.log(
      [
        key,
        f3(mean((r) => r.quality.f1)),
        f3(mean((r) => r.quality.meanMatchedIou)),
        f3(mean((r) => r.quality.aji)),
        speed.toFixed(2),
      ].join('\t'),
    );
  }
  console.log([literature.label, f3(literature.f1), '-', f3(literature.aji), '-'].join('\t'));
}

async function main(): Promise<void> {
  const spec = segmentationModelSpec('segmentation-baseline-v1');
  const segmenters: [string, Segmenter][] = [
    ['classical', createClassicalSegmenter()],
    [
      `onnx ${spec.version}`,
      createOnnxSegmenter({
        onnxFile: spec.onnxPath,
        modelVersion: spec.version,
        mpp: spec.mpp,
        halo: spec.halo,
        outputs: spec.outputs,
      }),
    ],
  ];
  const cases: Case[] = [];
  for (const halve of [false, true]) for (const t of tiles) cases.push(await readCase(t.name, t.mpp, halve));
  const rows: Row[] = [];
  for (const [label, segmenter] of segmenters)
    for (const c of cases) rows.push(await score(segmenter, label, c));
  printRows(rows);
  printMeans(rows);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
