// The suite's only reporter: a line per test file, the failures in full, and one plain closing
// line ("tests: N passed, N failed, N skipped") that CI reads. Jest's own reporter is left out
// because its per-file "PASS" lines and its "Tests: N passed, N total" summary look like other
// test runners' closing lines to a reader of the output's last lines.
// Under `npm test` the closing line goes to SPS_TEST_SUMMARY, which cli/dev.ts prints once Jest
// and the services have stopped, so that it is the last line of all. With SPS_TEST_PROFILE, the
// per-file wall and CPU seconds that test/support/file-profile.ts recorded come before it.
const { existsSync, readFileSync, writeFileSync } = require('node:fs');
const path = require('node:path');

function profileTable(file) {
  if (!file || !existsSync(file)) return '';
  const rows = readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line))
    .sort((a, b) => b.cpu + b.childCpu - (a.cpu + a.childCpu));
  const sum = (key) => rows.reduce((total, row) => total + row[key], 0).toFixed(1);
  const lines = rows.map(
    (r) =>
      `${r.wall.toFixed(1).padStart(7)} ${r.cpu.toFixed(1).padStart(7)} ${r.childCpu.toFixed(1).padStart(7)}  ${r.file}`,
  );
  return [
    '\n   wall     cpu   child  file (seconds; cpu: the Jest worker, child: its processes)',
    ...lines,
    `${sum('wall').padStart(7)} ${sum('cpu').padStart(7)} ${sum('childCpu').padStart(7)}  (sum of ${rows.length} files)`,
  ].join('\n');
}

const DIGEST_LINES = 20;

/**
 * The first lines of each failure, repeated at the end: CI shows the output's last lines, where
 * the full report printed as the file ended may already have scrolled away.
 */
function failureDigest(result, rootDir) {
  const file = path.relative(rootDir, result.testFilePath);
  const failures = result.testResults
    .filter((test) => test.status === 'failed')
    .map((test) => ({ name: test.fullName, message: test.failureMessages.join('\n') }));
  if (result.testExecError)
    failures.push({ name: '(the file did not run)', message: result.testExecError.message });
  return failures.map(({ name, message }) => {
    const lines = message
      .split('\n')
      .filter((line) => !/^\s+at /.test(line))
      .slice(0, DIGEST_LINES);
    return [`  ✗ ${file} › ${name}`, ...lines.map((line) => `      ${line}`)].join('\n');
  });
}

/** A log line as JSON; a line cut short (a process killed mid-write) is skipped, not fatal. */
function parsedLine(line) {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/**
 * Every 500 (`internal`) the test stacks' APIs answered (SPS_TEST_API_LOG, test/support/stack.ts),
 * whatever the tests asserted: the contract allows none, and the log holds the cause that the
 * answer's body does not.
 */
function internalErrors(file) {
  if (!file || !existsSync(file)) return [];
  const entries = readFileSync(file, 'utf8')
    .split('\n')
    .map(parsedLine)
    .filter((entry) => entry?.code === 'internal');
  return entries.map(({ path: route, err = {} }) => {
    const [first = '', ...frames] = (err.stack ?? err.message ?? '').split('\n');
    const ours = frames
      .filter((line) => !/node_modules|node:internal|\(node:/.test(line))
      .slice(0, DIGEST_LINES);
    const code = err.code ? ` (${err.code})` : '';
    return [`  500 on ${route}: ${first}${code}`, ...ours.map((line) => `    ${line.trim()}`)].join('\n');
  });
}

function fileFailed(result) {
  return result.numFailingTests > 0 || Boolean(result.testExecError);
}

class SummaryReporter {
  constructor(globalConfig) {
    this.rootDir = globalConfig.rootDir;
  }

  onTestResult(test, result) {
    const file = path.relative(this.rootDir, result.testFilePath);
    const seconds = ((result.perfStats.end - result.perfStats.start) / 1000).toFixed(1);
    const mark = fileFailed(result) ? '✗' : '✓';
    process.stderr.write(`${mark} ${test.context.config.displayName?.name ?? ''} ${file} (${seconds} s)\n`);
    if (!fileFailed(result)) return;
    // What the failing file logged, then why it failed.
    for (const entry of result.console ?? [])
      process.stderr.write(`  console.${entry.type}: ${entry.message}\n`);
    if (result.failureMessage) process.stderr.write(`${result.failureMessage}\n`);
  }

  onRunComplete(_contexts, results) {
    const { numPassedTests, numFailedTests, numPendingTests, numTodoTests } = results;
    // A file that could not run counts as one failed test, as Jest's exit code counts it.
    const failed = numFailedTests + results.numRuntimeErrorTestSuites;
    const failedFiles = results.testResults.filter(fileFailed);
    const digests = failedFiles.flatMap((r) => failureDigest(r, this.rootDir));
    if (digests.length > 0) process.stderr.write(`\nfailures:\n${digests.join('\n')}\n`);
    const internal = internalErrors(process.env.SPS_TEST_API_LOG);
    if (internal.length > 0) process.stderr.write(`\nthe API answered 500:\n${internal.join('\n')}\n`);
    process.stdout.write(`${profileTable(process.env.SPS_TEST_PROFILE)}\n`);
    const skipped = numPendingTests + numTodoTests;
    const closing = `tests: ${numPassedTests} passed, ${failed} failed, ${skipped} skipped\n`;
    if (process.env.SPS_TEST_SUMMARY) writeFileSync(process.env.SPS_TEST_SUMMARY, closing);
    else process.stdout.write(`\n${closing}`);
  }
}
module.exports = SummaryReporter;
