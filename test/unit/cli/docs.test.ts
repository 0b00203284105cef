import { readFileSync } from 'node:fs';
import path from 'node:path';
import { configVariables } from '../../../cli/config';

test('docs/operations.md documents every configuration variable', () => {
  const doc = readFileSync(path.join(__dirname, '..', '..', '..', 'docs', 'operations.md'), 'utf8');
  const missing = configVariables.filter((name) => !doc.includes(`\`${name}\``));
  expect(missing).toEqual([]);
});
