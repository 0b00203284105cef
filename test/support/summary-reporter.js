// Prints one plain closing line ("tests: N passed, N failed, N skipped") that CI reads.
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const { numPassedTests, numFailedTests, numPendingTests, numTodoTests } = results;
    const skipped = numPendingTests + numTodoTests;
    process.stdout.write(`\ntests: ${numPassedTests} passed, ${numFailedTests} failed, ${skipped} skipped\n`);
  }
}
module.exports = SummaryReporter;
