import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** The suite's reporter (jest.config.js): what a failed run prints at its end, where CI looks. */
interface Reporter {
  onRunComplete(contexts: unknown, results: unknown): void;
}
const SummaryReporter = require(
  path.join(__dirname, '..', '..', 'support', 'summary-reporter.js'),
) as new (config: {
  rootDir: string;
}) => Reporter;

const rootDir = '/repo';

function failedFile(name: string, message: string) {
  return {
    testFilePath: `${rootDir}/test/integration/x.test.ts`,
    numFailingTests: 1,
    testExecError: undefined,
    testResults: [
      { status: 'passed', fullName: 'fine', failureMessages: [] },
      { status: 'failed', fullName: name, failureMessages: [message] },
    ],
  };
}

/** What `onRunComplete` writes to stderr, with `apiLog` as the run's error log. */
async function endOfRun(testResults: unknown[], apiLog?: string): Promise<string> {
  const written: string[] = [];
  const stderr = jest.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
    written.push(String(chunk));
    return true;
  });
  const stdout = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
  const saved = { summary: process.env.SPS_TEST_SUMMARY, apiLog: process.env.SPS_TEST_API_LOG };
  process.env.SPS_TEST_SUMMARY = path.join(await mkdtemp(path.join(os.tmpdir(), 'reporter-')), 'summary');
  if (apiLog === undefined) delete process.env.SPS_TEST_API_LOG;
  else process.env.SPS_TEST_API_LOG = apiLog;
  try {
    new SummaryReporter({ rootDir }).onRunComplete(new Set(), {
      numPassedTests: 1,
      numFailedTests: testResults.length,
      numPendingTests: 0,
      numTodoTests: 0,
      numRuntimeErrorTestSuites: 0,
      testResults,
    });
  } finally {
    stderr.mockRestore();
    stdout.mockRestore();
    process.env.SPS_TEST_SUMMARY = saved.summary;
    if (saved.apiLog === undefined) delete process.env.SPS_TEST_API_LOG;
    else process.env.SPS_TEST_API_LOG = saved.apiLog;
  }
  return written.join('');
}

test('each failed test is repeated at the end with its message, without stack frames', async () => {
  const message = [
    'Error: expected 202',
    '  Received: 500',
    '    at Object.<anonymous> (x.test.ts:3:4)',
  ].join('\n');
  const out = await endOfRun([failedFile('a racing submission', message)]);
  expect(out).toContain('✗ test/integration/x.test.ts › a racing submission');
  expect(out).toContain('Error: expected 202');
  expect(out).toContain('Received: 500');
  expect(out).not.toContain('at Object.<anonymous>');
  expect(out).not.toContain('› fine');
});

test('every 500 in the error log is listed with its code and our frames; 503s and torn lines are not', async () => {
  const log = path.join(await mkdtemp(path.join(os.tmpdir(), 'reporter-')), 'api.jsonl');
  const internal = {
    code: 'internal',
    path: '/api/v1/predict',
    err: {
      code: '40P01',
      stack: [
        'PostgresError: deadlock detected',
        '    at ErrorResponse (/repo/node_modules/postgres/cjs/src/connection.js:1:1)',
        '    at submit (/repo/api/services/predictions.ts:170:5)',
      ].join('\n'),
    },
  };
  const outage = { code: 'unavailable', path: '/readyz', err: { message: 'connect ECONNREFUSED' } };
  await writeFile(log, `${JSON.stringify(outage)}\n${JSON.stringify(internal)}\n{"code":"inter`);
  const out = await endOfRun([], log);
  expect(out).toContain('500 on /api/v1/predict: PostgresError: deadlock detected (40P01)');
  expect(out).toContain('at submit (/repo/api/services/predictions.ts:170:5)');
  expect(out).not.toContain('node_modules');
  expect(out).not.toContain('/readyz');
});

test('a run without failures or 500s prints neither list', async () => {
  expect(await endOfRun([])).toBe('');
});
