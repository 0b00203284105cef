/** @jest-environment ./test/support/onnx-environment.js */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { closeModelSessions, openModelSession } from '../../../compute/prediction';
import { markerCatalog, modelSpec } from '../../../models/registry';
import { runPython, runPythonJson } from '../../support/python';

// The model threads this file's predictions opened; left running, they hold Jest's worker at exit.
afterAll(() => closeModelSessions());

const root = path.join(__dirname, '..', '..', '..');
const spec = modelSpec('v0.7');
const side = spec.tileSize + 2 * spec.halo;

/** `count` tiles of one RGB colour each. */
function tiles(colours: readonly (readonly [number, number, number])[]): Float32Array {
  const plane = side * side;
  const input = new Float32Array(colours.length * 3 * plane);
  colours.forEach((rgb, k) => {
    for (let c = 0; c < 3; c++) input.fill(rgb[c]!, (k * 3 + c) * plane, (k * 3 + c + 1) * plane);
  });
  return input;
}

describe('the bundled v0.7 baseline model', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sps-model-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('is what scripts/make-baseline-model.py makes, byte for byte', async () => {
    const out = path.join(dir, 'regenerated.onnx');
    await runPython(
      `import runpy, sys; out, script = sys.argv[1:]; sys.argv = [script, '--out', out]; runpy.run_path(script, run_name='__main__')`,
      [out, path.join(root, 'scripts', 'make-baseline-model.py')],
    );
    const [made, committed] = await Promise.all([readFile(out), readFile(spec.onnxPath)]);
    expect(Buffer.compare(made, committed)).toBe(0);
  }, 60_000);

  it('declares the registry channels, tile, halo and scale in its metadata', async () => {
    const meta = await runPythonJson<{ props: Record<string, string>; input: number[]; output: number[] }>(
      `
import json, sys, onnx
m = onnx.load(sys.argv[1])
dims = lambda v: [d.dim_value or -1 for d in v.type.tensor_type.shape.dim]
print(json.dumps({'props': {p.key: p.value for p in m.metadata_props}, 'input': dims(m.graph.input[0]), 'output': dims(m.graph.output[0])}))
`,
      [spec.onnxPath],
    );
    expect(meta.props['sps.channels']!.split(',')).toEqual(markerCatalog().map((c) => c.name));
    expect(meta.props).toMatchObject({
      'sps.tile': '224',
      'sps.halo': '8',
      'sps.mpp': '0.5',
      'sps.version': 'v0.7',
    });
    expect(meta.input).toEqual([-1, 3, side, side]);
    expect(meta.output).toEqual([-1, 14, 224, 224]);
  });

  it('answers [N, 14, 224, 224]: nothing on glass, DAPI on hematoxylin, stroma markers on eosin', async () => {
    const session = await openModelSession(spec);
    // Glass, a hematoxylin-blue field, an eosin-pink field.
    const out = await session.run(
      tiles([
        [255, 255, 255],
        [70, 60, 140],
        [235, 120, 190],
      ]),
      3,
    );
    expect(out.length).toBe(3 * 14 * 224 * 224);
    const at = (tile: number, marker: string) =>
      out[(tile * 14 + spec.channels.indexOf(marker)) * 224 * 224 + 112 * 224 + 112]!;
    expect(out.subarray(0, 14 * 224 * 224).every((v) => v === 0)).toBe(true);
    expect(at(1, 'DAPI')).toBeGreaterThan(0.8);
    expect(at(2, 'DAPI')).toBe(0);
    expect(at(2, 'aSMA')).toBeGreaterThan(0.2);
    expect(at(2, 'Vimentin')).toBeGreaterThan(0.2);
    expect(at(1, 'aSMA')).toBe(0);
    expect(out.every((v) => v >= 0 && v < 1)).toBe(true);
    // The session on the calling thread answers the same floats as the worker-thread default.
    const main = await openModelSession(spec, { thread: 'main' });
    const same = await main.run(
      tiles([
        [255, 255, 255],
        [70, 60, 140],
        [235, 120, 190],
      ]),
      3,
    );
    expect(
      Buffer.compare(
        Buffer.from(same.buffer, same.byteOffset, same.byteLength),
        Buffer.from(out.buffer, out.byteOffset, out.byteLength),
      ),
    ).toBe(0);
  });

  it('writes the answer into a given buffer, shared between threads or not, on either thread', async () => {
    const input = tiles([
      [70, 60, 140],
      [235, 120, 190],
    ]);
    const reference = await (await openModelSession(spec)).run(input, 2);
    const length = 2 * 14 * 224 * 224;
    for (const thread of ['worker', 'main'] as const) {
      const session = await openModelSession(spec, { thread });
      for (const output of [
        new Float32Array(length),
        new Float32Array(new SharedArrayBuffer(length * Float32Array.BYTES_PER_ELEMENT)),
      ]) {
        const answer = await session.run(input, 2, output);
        expect(answer).toBe(output);
        expect({ thread, same: output.every((v, i) => v === reference[i]) }).toEqual({ thread, same: true });
      }
    }
  });
});
