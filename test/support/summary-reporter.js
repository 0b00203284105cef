// The plain closing line that CI reads ("tests: N passed, N failed, N skipped"), and with
// SPS_TEST_PROFILE the per-file wall and CPU seconds that test/support/file-profile.ts recorded.
// Under `npm test` the line goes to SPS_TEST_SUMMARY, which cli/dev.ts prints once Jest and the
// services have stopped: CI reads only the closing lines, and Jest's own summary (on stderr)
// and the services' shutdown would otherwise come after it.
const { existsSync, readFileSync, writeFileSync } = require('node:fs');

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

class SummaryReporter {
  onRunComplete(_contexts, results) {
    const { numPassedTests, numFailedTests, numPendingTests, numTodoTests } = results;
    const skipped = numPendingTests + numTodoTests;
    process.stdout.write(`${profileTable(process.env.SPS_TEST_PROFILE)}\n`);
    const closing = `tests: ${numPassedTests} passed, ${numFailedTests} failed, ${skipped} skipped\n`;
    if (process.env.SPS_TEST_SUMMARY) writeFileSync(process.env.SPS_TEST_SUMMARY, closing);
    else process.stdout.write(`\n${closing}`);
  }
}
module.exports = SummaryReporter;
