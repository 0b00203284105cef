// Orders the test files so that no worker waits for the shared slides' templates
// (test/support/shared-slides.ts): a file that asks for the processed template goes first and
// builds both; the files that need neither follow (the longest first, Jest's order), and the
// other template users sit in the middle of them, when the templates are long built.
const { readFileSync } = require('node:fs');
const Sequencer = require('@jest/test-sequencer').default;

const usesTemplate = (test) => /sharedSlides:/.test(readFileSync(test.path, 'utf8'));
const usesProcessed = (test) => /sharedSlides: 'processed'/.test(readFileSync(test.path, 'utf8'));

class SharedSlidesSequencer extends Sequencer {
  sort(tests) {
    const sorted = super.sort(tests);
    const builder = sorted.find(usesProcessed) ?? sorted.find(usesTemplate);
    if (!builder) return sorted;
    const users = sorted.filter((test) => test !== builder && usesTemplate(test));
    const rest = sorted.filter((test) => test !== builder && !usesTemplate(test));
    const middle = Math.ceil(rest.length / 2);
    return [builder, ...rest.slice(0, middle), ...users, ...rest.slice(middle)];
  }
}

module.exports = SharedSlidesSequencer;
