// Orders the test files.
// - Longest first, so that no long file starts last: Jest's own timings, else those of earlier
//   runs in any checkout, kept by path within the repository in the cache outside it (a clean
//   clone has no Jest cache of its own), else by file size.
// - No worker waits for the shared slides' templates (test/support/shared-slides.ts): a file
//   that asks for the processed template goes first and builds both; the other template users
//   sit in the middle of the files that need none, when the templates are long built.
const { mkdirSync, readFileSync, renameSync, writeFileSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;

const cacheDir = process.env.SPS_CACHE_DIR || path.join(os.homedir(), '.cache', 'sps');
const durationsFile = path.join(cacheDir, 'test-durations.json');

const usesTemplate = (test) => /sharedSlides:/.test(readFileSync(test.path, 'utf8'));
const usesProcessed = (test) => /sharedSlides: 'processed'/.test(readFileSync(test.path, 'utf8'));
const key = (test) => path.relative(test.context.config.rootDir, test.path);

function readDurations() {
  try {
    return JSON.parse(readFileSync(durationsFile, 'utf8'));
  } catch {
    return {};
  }
}

class SharedSlidesSequencer extends Sequencer {
  durations = readDurations();

  time(test) {
    return super.time(test) ?? this.durations[key(test)];
  }

  sort(tests) {
    const sorted = super.sort(tests);
    const builder = sorted.find(usesProcessed) ?? sorted.find(usesTemplate);
    if (!builder) return sorted;
    const users = sorted.filter((test) => test !== builder && usesTemplate(test));
    const rest = sorted.filter((test) => test !== builder && !usesTemplate(test));
    const middle = Math.ceil(rest.length / 2);
    return [builder, ...rest.slice(0, middle), ...users, ...rest.slice(middle)];
  }

  cacheResults(tests, results) {
    super.cacheResults(tests, results);
    const byPath = new Map(tests.map((test) => [test.path, test]));
    const durations = readDurations();
    for (const result of results.testResults) {
      const test = byPath.get(result.testFilePath);
      const runtime = result.perfStats?.runtime;
      if (test && !result.skipped && runtime > 0) durations[key(test)] = runtime;
    }
    try {
      mkdirSync(cacheDir, { recursive: true });
      const partial = `${durationsFile}.${process.pid}`;
      writeFileSync(partial, JSON.stringify(durations));
      renameSync(partial, durationsFile);
    } catch {
      // Only an ordering hint: a run that cannot write it runs as well.
    }
  }
}

module.exports = SharedSlidesSequencer;
