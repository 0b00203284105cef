import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import {
  createClassicalSegmenter,
  createOnnxSegmenter,
  type LabelImage,
  type Segmenter,
} from '../compute/segmentation';
import { CURRENT_SEGMENTATION_MODEL, segmentationModelSpec } from '../models/registry';

/**
 * Segments one RGB image file (any format sharp reads: TIFF, PNG, JPEG) and writes the nucleus
 * labels, and optionally the cell labels, as 16-bit greyscale PNGs (0 = background, 1..N), then
 * prints the counts. For looking at a segmenter's output on a tile without the service:
 *
 *   npm run build && node dist/bench/segment-tile.js --image tile.tif --mpp 0.25 \
 *     --out nuclei.png [--cells cells.png] [--segmenter classical|onnx]
 */
const { values } = parseArgs({
  options: {
    image: { type: 'string' },
    mpp: { type: 'string' },
    out: { type: 'string' },
    cells: { type: 'string' },
    segmenter: { type: 'string', default: 'classical' },
  },
});

function chooseSegmenter(name: string): Segmenter {
  if (name === 'classical') return createClassicalSegmenter();
  if (name !== 'onnx') throw new Error(`--segmenter must be classical or onnx, not ${name}`);
  const spec = segmentationModelSpec(CURRENT_SEGMENTATION_MODEL);
  return createOnnxSegmenter({
    onnxFile: spec.onnxPath,
    modelVersion: spec.version,
    mpp: spec.mpp,
    halo: spec.halo,
    outputs: spec.outputs,
  });
}

async function writeLabelPng(file: string, image: LabelImage): Promise<void> {
  if (image.count > 0xffff) throw new Error(`${image.count} objects do not fit a 16-bit PNG`);
  const pixels = Uint16Array.from(image.labels);
  const png = await sharp(pixels, { raw: { width: image.width, height: image.height, channels: 1 } })
    .toColourspace('grey16')
    .png()
    .toBuffer();
  await writeFile(file, png);
}

async function main(): Promise<void> {
  const mpp = Number(values.mpp);
  if (!values.image || !values.out || !(mpp > 0)) {
    throw new Error('usage: segment-tile --image FILE --mpp MICRONS --out NUCLEI.png [--cells CELLS.png]');
  }
  const decoded = await sharp(values.image).removeAlpha().toColourspace('srgb').raw().toBuffer({
    resolveWithObject: true,
  });
  const tile = { data: new Uint8Array(decoded.data), width: decoded.info.width, height: decoded.info.height };
  const segmenter = chooseSegmenter(values.segmenter);
  const start = performance.now();
  const { nuclei, cells } = await segmenter.segment(tile, mpp);
  const ms = performance.now() - start;
  await writeLabelPng(values.out, nuclei);
  if (values.cells) await writeLabelPng(values.cells, cells);
  let nucleusPixels = 0;
  for (const l of nuclei.labels) if (l !== 0) nucleusPixels++;
  console.log(
    `${segmenter.name} ${segmenter.version}: ${nuclei.count} nuclei in ${tile.width} x ${tile.height} px ` +
      `at ${mpp} µm/px, ${((100 * nucleusPixels) / nuclei.labels.length).toFixed(1)} % of the tile, ` +
      `${ms.toFixed(0)} ms`,
  );
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
