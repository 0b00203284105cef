import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

/** The project as npm sees it: what `npm start` and `npm test` print first, and what they install. */
const ROOT = path.join(__dirname, '..', '..', '..');

test('npm reads the project configuration without a warning', () => {
  const npm = spawnSync('npm', ['pkg', 'get', 'name'], { cwd: ROOT, encoding: 'utf8' });
  expect({ status: npm.status, stdout: npm.stdout.trim(), stderr: npm.stderr }).toEqual({
    status: 0,
    stdout: '"slide-prediction-service"',
    stderr: '',
  });
});

/** ONNX Runtime asks for its CUDA libraries on Linux x64 only. */
const linuxX64 = process.platform === 'linux' && process.arch === 'x64';

(linuxX64 ? test : test.skip)(
  "the bootstrap's install leaves out ONNX Runtime's CUDA libraries (prediction runs on its CPU build)",
  () => {
    const runtime = path.join(ROOT, 'node_modules', 'onnxruntime-node', 'bin', 'napi-v6', 'linux', 'x64');
    expect(existsSync(path.join(runtime, 'libonnxruntime.so.1'))).toBe(true);
    expect(existsSync(path.join(runtime, 'libonnxruntime_providers_cuda.so'))).toBe(false);
  },
);
