import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

/** The project as npm sees it: what `npm start` and `npm test` print first, and what they install. */
const ROOT = path.join(__dirname, '..', '..', '..');

const npm = (...args: string[]) => spawnSync('npm', args, { cwd: ROOT, encoding: 'utf8' });

/** npm 11.16 reads package.json's `allowScripts`; npm 12 runs no dependency script it leaves out. */
const npmReadsAllowScripts = (() => {
  const [major = 0, minor = 0] = npm('--version').stdout.trim().split('.').map(Number);
  return major > 11 || (major === 11 && minor >= 16);
})();

test('npm reads the project configuration without a warning', () => {
  const name = npm('pkg', 'get', 'name');
  expect({ status: name.status, stdout: name.stdout.trim(), stderr: name.stderr }).toEqual({
    status: 0,
    stdout: '"slide-prediction-service"',
    stderr: '',
  });
});

(npmReadsAllowScripts ? test : test.skip)(
  "every dependency's install script is allowed or denied in package.json",
  () => {
    const pending = npm('install-scripts', 'ls');
    expect({ status: pending.status, stdout: pending.stdout.trim() }).toEqual({
      status: 0,
      stdout: 'No packages with unreviewed install scripts.',
    });
  },
);

/** ONNX Runtime asks for its CUDA libraries on Linux x64 only. */
const linuxX64 = process.platform === 'linux' && process.arch === 'x64';

(linuxX64 ? test : test.skip)(
  "the install leaves out ONNX Runtime's CUDA libraries (prediction runs on its CPU build)",
  () => {
    const runtime = path.join(ROOT, 'node_modules', 'onnxruntime-node', 'bin', 'napi-v6', 'linux', 'x64');
    expect(existsSync(path.join(runtime, 'libonnxruntime.so.1'))).toBe(true);
    expect(existsSync(path.join(runtime, 'libonnxruntime_providers_cuda.so'))).toBe(false);
  },
);
