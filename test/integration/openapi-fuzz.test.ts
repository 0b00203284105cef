import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { grantCredits } from '../../db/credits';
import { testPython } from '../support/python';
import { SHARED_SLIDES_SETUP_MS, startStack, type TestStack } from '../support/stack';

/**
 * Schemathesis (PyPI, in the checkers' venv) against the real stack, from the document the
 * server serves: every check it has, every phase, every operation, and stateful runs that follow
 * the document's links from an upload to its sample, a job and an export of that job. Any
 * failure fails this test, with Schemathesis's own report of it (and the curl to reproduce it).
 */
const CONFIG = path.join(__dirname, '..', 'support', 'schemathesis.toml');
/** Fixed, so a failure in CI reproduces; `SPS_FUZZ_SEED` tries others. */
const SEED = process.env.SPS_FUZZ_SEED ?? '23';
const RUN_LIMIT_MS = 170_000;

let stack: TestStack;

beforeAll(async () => {
  // A ready sample with a completed job and a segmentation layer: the links lead to them.
  stack = await startStack({ sharedSlides: 'processed' });
  await grantCredits(stack.sql, { organizationId: stack.tenant.organizationId, amount: 1_000_000 });
}, SHARED_SLIDES_SETUP_MS);
afterAll(async () => {
  await stack?.close();
});

interface RunOutcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs in `dir`: Schemathesis keeps its cache and crash files in the working directory. */
function runSchemathesis(dir: string, args: string[]): Promise<RunOutcome> {
  return new Promise((resolve) => {
    execFile(
      testPython(),
      ['-m', 'schemathesis.cli', '--config-file', CONFIG, '--no-color', 'run', ...args],
      {
        cwd: dir,
        maxBuffer: 64 << 20,
        timeout: RUN_LIMIT_MS,
        // test/support/schemathesis.toml sends it where the document asks for `bearer`.
        env: { ...process.env, PYTHONUNBUFFERED: '1', SPS_FUZZ_API_KEY: stack.tenant.apiKey },
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

test(
  'Schemathesis finds no failure on any operation, statefully through the links',
  async () => {
    const reports = await mkdtemp(path.join(tmpdir(), 'sps-fuzz-'));
    try {
      const outcome = await runSchemathesis(reports, [
        `${stack.api}/openapi.json`,
        '--url',
        stack.baseUrl,
        '--checks',
        'all',
        '--seed',
        SEED,
        '--report',
        'junit',
        '--report-junit-path',
        path.join(reports, 'junit.xml'),
      ]);
      const summary = outcome.stdout.slice(outcome.stdout.lastIndexOf('SUMMARY'));
      if (outcome.code !== 0) {
        // The whole report: each failure with its check, the response and a curl to replay it.
        throw new Error(
          `schemathesis exited ${outcome.code} (seed ${SEED}):\n${outcome.stdout}\n${outcome.stderr}`,
        );
      }
      // Every operation was tried, and the stateful phase followed the document's links.
      const junit = await readFile(path.join(reports, 'junit.xml'), 'utf8');
      expect(junit).not.toMatch(/<failure|<error/);
      const [, selected, total] = /Selected: (\d+)\/(\d+)/.exec(summary) ?? [];
      expect({ selected, tested: /Tested: (\d+)/.exec(summary)?.[1] }).toEqual({
        selected: total,
        tested: total,
      });
      expect(summary).toContain('✅ Stateful');
      const linksCovered = Number(/API Links:\s+(\d+) covered/.exec(outcome.stdout)?.[1] ?? 0);
      expect(linksCovered).toBeGreaterThan(0);
      console.log(summary);
    } finally {
      await rm(reports, { recursive: true, force: true });
    }
  },
  RUN_LIMIT_MS + 20_000,
);
