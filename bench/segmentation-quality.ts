import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
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
import { halveImage, halveLabels, perturbations } from './perturb';

/**
 * Nucleus segmentation quality and speed on the annotated MoNuSeg tiles of the shared test data
 * (../shared/data/nuclei/SOURCES.md): detection F1 at IoU 0.5, the mean IoU of matched pairs and
 * the Aggregated Jaccard Index (Kumar et al. 2017), per image, for the classical segmenter and the
 * ONNX segmenter with the bundled (untrained) baseline model. Each tile is also scored at 0.5
 * µm/px (image and labels halved), the scale of 20x slides, to check that the parameters in
 * microns carry over. Times are of warm single-threaded runs on this machine.
 *
 * Then the robustness table: the same tiles under perturbations that mimic other labs and
 * scanners (bench/perturb.ts), each scored for the default segmenter beside the plain
 * scikit-image pipeline (bench/segmentation_skimage_plain.py, run in the checkers' venv) on the
 * same pixels: F1 at IoU 0.5, AJI and PQ, means over the tiles. These tiles were used to develop
 * the segmenter, so the table measures robustness to the perturbations, not accuracy on unseen
 * slides.
 *
 *   npm run bench:segmentation-quality [-- --repeat 3] [-- --only robustness]
 */
const { values } = parseArgs({
  options: {
    repeat: { type: 'string', default: '3' },
    only: { type: 'string' },
    python: {
      type: 'string',
      default:
        process.env.SPS_TEST_PYTHON ?? path.join(process.env.HOME ?? '/root', '.cache/sps/venv/bin/python'),
    },
  },
});
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
  console.log(
    ['segmenter', 'tile', 'ref', 'pred', 'P', 'R', 'F1', 'mIoU', 'PQ', 'AJI', 'ms', 'Mpx/s'].join('\t'),
  );
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
        f3(q.pq),
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

interface RobustnessCase {
  perturbation: string;
  tile: string;
  image: RgbImage;
  mpp: number;
  reference: Uint16Array;
}

async function perturbedCases(): Promise<RobustnessCase[]> {
  const out: RobustnessCase[] = [];
  for (const t of tiles) {
    const { image, reference } = await readCase(t.name, t.mpp, false);
    for (const p of perturbations(t.mpp)) {
      out.push({
        perturbation: p.name,
        tile: t.name,
        image: await p.apply(image),
        mpp: p.halve ? 2 * t.mpp : t.mpp,
        reference: p.halve ? halveLabels(reference, image.width, image.height) : reference,
      });
    }
  }
  return out;
}

/** The plain scikit-image pipeline's labels for every case, from one run of the venv's Python. */
async function skimageLabels(cases: RobustnessCase[]): Promise<Uint32Array[]> {
  const dir = await mkdtemp(path.join(tmpdir(), 'sps-robustness-'));
  try {
    const spec = await Promise.all(
      cases.map(async (c, k) => {
        const image = path.join(dir, `${k}.rgb`);
        await writeFile(image, c.image.data);
        return {
          image,
          labels: path.join(dir, `${k}.labels`),
          width: c.image.width,
          height: c.image.height,
          mpp: c.mpp,
        };
      }),
    );
    await writeFile(path.join(dir, 'cases.json'), JSON.stringify(spec));
    const script = path.join(__dirname, '..', '..', 'bench', 'segmentation_skimage_plain.py');
    await promisify(execFile)(values.python, [script, path.join(dir, 'cases.json')], {
      env: { ...process.env, OMP_NUM_THREADS: '1', OPENBLAS_NUM_THREADS: '1' },
    });
    return Promise.all(
      spec.map(async (s) => {
        const bytes = await readFile(s.labels);
        return new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4).slice();
      }),
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function robustness(): Promise<void> {
  const segmenter = createClassicalSegmenter();
  const cases = await perturbedCases();
  const plain = await skimageLabels(cases);
  const scores = await Promise.all(
    cases.map(async (c, k) => ({
      c,
      ours: segmentationQuality(c.reference, (await segmenter.segment(c.image, c.mpp)).nuclei.labels),
      skimage: segmentationQuality(c.reference, plain[k]!),
    })),
  );
  const names = [...new Set(cases.map((c) => c.perturbation))];
  const mean = (name: string, pick: (s: (typeof scores)[number]) => number) => {
    const group = scores.filter((s) => s.c.perturbation === name);
    return group.reduce((sum, s) => sum + pick(s), 0) / group.length;
  };
  const unperturbed = mean(names[0]!, (s) => s.ours.f1);
  console.log(
    `\nrobustness: ${segmenter.name} ${segmenter.version} beside plain scikit-image, means over ${tiles.length} tiles`,
  );
  console.log(
    ['perturbation', 'F1', 'AJI', 'PQ', 'skimage F1', 'skimage AJI', 'skimage PQ', 'F1 drop', 'holds'].join(
      '\t',
    ),
  );
  for (const name of names) {
    const f1 = mean(name, (s) => s.ours.f1);
    const skimageF1 = mean(name, (s) => s.skimage.f1);
    const holds = unperturbed - f1 <= 0.05 && f1 > skimageF1;
    console.log(
      [
        name,
        f3(f1),
        f3(mean(name, (s) => s.ours.aji)),
        f3(mean(name, (s) => s.ours.pq)),
        f3(skimageF1),
        f3(mean(name, (s) => s.skimage.aji)),
        f3(mean(name, (s) => s.skimage.pq)),
        f3(unperturbed - f1),
        holds ? 'yes' : 'NO',
      ].join('\t'),
    );
  }
}

async function main(): Promise<void> {
  if (values.only === 'robustness') return robustness();
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
  await robustness();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
