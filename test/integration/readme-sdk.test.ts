/** @jest-environment ./test/support/onnx-environment.js */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { startStack, type TestStack } from '../support/stack';
import { SHARED_WSI } from '../support/uploads';

/**
 * The README's TypeScript SDK example, run as written against the real stack: only its
 * imports point at the build, its service URL and slide at the test's, and `save` (the
 * reader's own) is given. A renamed function or option there fails here.
 */
const ROOT = path.join(__dirname, '..', '..');
let stack: TestStack;
let scratch: string;

beforeAll(async () => {
  stack = await startStack({ worker: true });
  scratch = await mkdtemp(path.join(os.tmpdir(), 'readme-sdk-'));
}, 120_000);
afterAll(async () => {
  await stack?.close();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

/** The first ```ts block after the heading "## The TypeScript SDK". */
async function readmeExample(): Promise<string> {
  const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## The TypeScript SDK'));
  const block = /```ts\n([\s\S]*?)```/.exec(section);
  if (!block) throw new Error('the README has no TypeScript SDK example');
  return block[1]!;
}

function replaceOnce(text: string, from: string, to: string): string {
  if (!text.includes(from)) throw new Error(`the README's example no longer has ${from}`);
  return text.replace(from, to);
}

test("the README's SDK example uploads, predicts, reads the result store and catches an error code", async () => {
  let example = await readmeExample();
  example = replaceOnce(example, "from './sdk';", `from '${path.join(ROOT, 'dist', 'sdk', 'index.js')}';`);
  example = replaceOnce(
    example,
    "from './sdk/node';",
    `from '${path.join(ROOT, 'dist', 'sdk', 'node', 'index.js')}';`,
  );
  example = replaceOnce(example, "'http://127.0.0.1:8080'", JSON.stringify(stack.baseUrl));
  example = replaceOnce(example, "'slide.svs'", JSON.stringify(path.join(SHARED_WSI, 'OS-1-detail.ome.tif')));
  const script = path.join(scratch, 'example.mjs');
  await writeFile(
    script,
    `const save = (session) => console.log('session', session.uploadUrl !== undefined);\n${example}\nconsole.log('shape', JSON.stringify(dapi.shape));\n`,
  );
  const { stdout, stderr } = await promisify(execFile)(process.execPath, [script], {
    env: { ...process.env, SPS_API_KEY: stack.tenant.apiKey },
    cwd: scratch,
  });
  const saved = stdout.split('\n');
  expect(stderr).toBe('');
  expect(saved).toContain('session true');
  // The upload's progress to 1, the job's statuses to the end, the error, then level 0's shape.
  expect(saved).toContain('1');
  expect(saved).toContain('completed 1');
  expect(saved).toContain('sample not found');
  const shape = JSON.parse(saved.at(-2)!.replace(/^shape /, '')) as number[];
  expect(shape).toEqual([1, expect.any(Number), expect.any(Number)]);
  expect(shape[1]).toBeGreaterThan(0);
}, 300_000);
