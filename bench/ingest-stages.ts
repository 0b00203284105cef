import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { deidentifyTiff } from '../compute/deid';
import { buildHePyramid, readPyramidLevel } from '../compute/pyramid';
import { openTiffSlide } from '../compute/slide';
import { fileSource } from '../compute/source';
import { countTissuePatches, detectTissue } from '../compute/tissue';
import { folderStore } from '../compute/zarr';

/**
 * The compute stages of ingest on one local slide, in this process alone, so that its peak RSS
 * is theirs: de-identification, probe, H&E pyramid, tissue mask and patch count. Prints one
 * JSON line of seconds per stage and the peak RSS after each. Used by bench/ingest.ts:
 *   node dist/bench/ingest-stages.js SLIDE OUT_DIR
 */
const peakMiB = () => Math.round(process.resourceUsage().maxRSS / 1024);

async function timed<T>(report: Record<string, number>, name: string, work: () => Promise<T>): Promise<T> {
  const started = performance.now();
  const result = await work();
  report[`${name}Seconds`] = Number(((performance.now() - started) / 1000).toFixed(2));
  report[`${name}PeakRssMiB`] = peakMiB();
  return result;
}

async function main(slide: string, out: string): Promise<void> {
  await mkdir(out, { recursive: true });
  const report: Record<string, number> = {};
  const copy = path.join(out, 'deidentified.svs');
  await timed(report, 'deid', async () => {
    const source = await fileSource(slide);
    try {
      await deidentifyTiff(source, createWriteStream(copy));
    } finally {
      await source.close();
    }
  });
  const source = await fileSource(copy);
  try {
    const image = await timed(report, 'probe', () => openTiffSlide(source));
    const mpp = image.probe.effectiveMpp;
    const sink = folderStore(path.join(out, 'he'));
    const pyramid = await timed(report, 'pyramid', () => buildHePyramid({ image, sink, mpp, name: 'H&E' }));
    await timed(report, 'tissue', async () => {
      // Level 4 of 0.5 µm pixels is 8 µm per pixel, the scale ingest finds tissue at.
      const level = Math.min(4, pyramid.levels.length - 1);
      const tissue = detectTissue(await readPyramidLevel(sink, level));
      report.patchCount = countTissuePatches({
        ...tissue,
        maskDownsample: 2 ** level,
        levelWidthPx: image.widthPx,
        levelHeightPx: image.heightPx,
        mpp: mpp ?? 0.5,
      });
    });
  } finally {
    await source.close();
  }
  console.log(JSON.stringify(report));
}

const [slide, out] = process.argv.slice(2);
if (!slide || !out) throw new Error('usage: ingest-stages SLIDE OUT_DIR');
main(slide, out).catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
