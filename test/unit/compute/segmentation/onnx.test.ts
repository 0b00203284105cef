/** @jest-environment ./test/support/onnx-environment.js */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { isComputeError } from '../../../../compute/errors';
import { createOnnxSegmenter } from '../../../../compute/segmentation/onnx';
import { segmentationQuality } from '../../../../compute/segmentation/quality';
import { segmentationModelSpec } from '../../../../models/registry';
import { runPython } from '../../../support/python';
import { monusegTiles, readAnnotatedTile } from './monuseg';

const root = path.join(__dirname, '..', '..', '..', '..');
const spec = segmentationModelSpec('segmentation-baseline-v1');

function segmenterOf(onnxFile: string, outputs = spec.outputs) {
  return createOnnxSegmenter({
    onnxFile,
    modelVersion: spec.version,
    mpp: spec.mpp,
    halo: spec.halo,
    outputs,
  });
}

describe('the ONNX segmenter with the bundled baseline model', () => {
  it.each(monusegTiles)(
    'finds the nuclei of a crop of $name, resampled to the model scale and back',
    async ({ name, mpp }) => {
      const { image, reference } = await readAnnotatedTile(name, {
        left: 300,
        top: 300,
        width: 320,
        height: 280,
      });
      const { nuclei, cells } = await segmenterOf(spec.onnxPath).segment(image, mpp);
      expect([nuclei.width, nuclei.height]).toEqual([320, 280]);
      expect(cells.count).toBe(nuclei.count);
      let max = 0;
      for (const l of nuclei.labels) if (l > max) max = l;
      expect(max).toBe(nuclei.count);
      expect(segmentationQuality(reference, nuclei.labels).f1).toBeGreaterThan(0.55);
    },
  );

  it('takes a tile already at the model scale as it is', async () => {
    const { image } = await readAnnotatedTile(monusegTiles[0].name, {
      left: 0,
      top: 0,
      width: 200,
      height: 160,
    });
    const { nuclei } = await segmenterOf(spec.onnxPath).segment(image, spec.mpp);
    expect(nuclei.count).toBeGreaterThan(0);
  });

  it('refuses a model that lacks the outputs it is configured with', async () => {
    const segmenter = segmenterOf(spec.onnxPath, { foreground: 'foreground', centre: 'centre' });
    const tile = { data: new Uint8Array(16 * 16 * 3).fill(200), width: 16, height: 16 };
    const failure = await segmenter.segment(tile, 0.5).catch((err: unknown) => err);
    expect(isComputeError(failure, 'UnsupportedModel')).toBe(true);
  });

  it('is what scripts/make-segmentation-model.py makes, byte for byte', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sps-segmodel-'));
    try {
      const out = path.join(dir, 'regenerated.onnx');
      await runPython(
        `import runpy, sys; out, script = sys.argv[1:]; sys.argv = [script, '--out', out]; runpy.run_path(script, run_name='__main__')`,
        [out, path.join(root, 'scripts', 'make-segmentation-model.py')],
      );
      const [made, committed] = await Promise.all([readFile(out), readFile(spec.onnxPath)]);
      expect(Buffer.compare(made, committed)).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
