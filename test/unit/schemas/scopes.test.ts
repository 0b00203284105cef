import { readFileSync } from 'node:fs';
import path from 'node:path';
import { endpoints } from '../../../schemas/endpoints';
import { describeScopeRule, exportScopes, requiredScopes, scopeRules } from '../../../schemas/scopes';

test('every endpoint has a scope rule; every bearer endpoint needs at least one scope', () => {
  for (const [name, endpoint] of Object.entries(endpoints)) {
    const rule = scopeRules[name as keyof typeof scopeRules];
    expect({ name, hasRule: rule !== undefined }).toEqual({ name, hasRule: true });
    if (endpoint.auth === 'bearer') {
      expect({ name, kind: rule.kind }).not.toEqual({ name, kind: 'none' });
      expect(requiredScopes(rule, { body: {}, query: {} }).length).toBeGreaterThan(0);
    } else {
      expect({ name, kind: rule.kind }).toEqual({ name, kind: 'none' });
    }
  }
});

test('contract rule 5: a sample update needs samples:read and samples:write', () => {
  expect(requiredScopes(scopeRules.patchSample, { body: { name: 'x' }, query: {} })).toEqual([
    'samples:read',
    'samples:write',
  ]);
});

test('a prediction submission needs jobs:write and credits:spend; a dry run only prices', () => {
  expect(requiredScopes(scopeRules.predict, { body: { markers: ['CD3'] }, query: {} })).toEqual([
    'jobs:write',
    'credits:spend',
  ]);
  expect(requiredScopes(scopeRules.predict, { body: { dryRun: false }, query: {} })).toEqual([
    'jobs:write',
    'credits:spend',
  ]);
  expect(requiredScopes(scopeRules.predict, { body: { dryRun: true }, query: {} })).toEqual(['samples:read']);
});

test('contract rule 6: an export including segmentation or the original upload adds samples:read', () => {
  const post = exportScopes(['jobs:write'], 'body');
  const at = (body: unknown) => requiredScopes(post, { body, query: {} });
  expect(at({ format: 'ome-zarr' })).toEqual(['jobs:write']);
  expect(at({ format: 'ome-zarr', includeHe: true })).toEqual(['jobs:write']);
  expect(at({ includeSegmentation: true })).toEqual(['jobs:write', 'samples:read']);
  expect(at({ includeOriginalUpload: true })).toEqual(['jobs:write', 'samples:read']);
  expect(at({ includeSegmentation: false, includeOriginalUpload: false })).toEqual(['jobs:write']);
  const get = exportScopes(['results:read'], 'query');
  expect(requiredScopes(get, { body: undefined, query: { includeSegmentation: 'true' } })).toEqual([
    'results:read',
    'samples:read',
  ]);
  expect(requiredScopes(get, { body: undefined, query: { includeSegmentation: 'false' } })).toEqual([
    'results:read',
  ]);
  expect(describeScopeRule(post)).toContain('samples:read when includeSegmentation or includeOriginalUpload');
});

test('docs/api.md lists the scopes of every bearer endpoint', () => {
  const doc = readFileSync(path.join(__dirname, '..', '..', '..', 'docs', 'api.md'), 'utf8');
  const missing = Object.entries(endpoints)
    .filter(([, endpoint]) => endpoint.auth === 'bearer')
    .map(([name, endpoint]) => {
      const row = `\`${endpoint.method.toUpperCase()} ${endpoint.path}\``;
      const scopes = describeScopeRule(scopeRules[name as keyof typeof scopeRules]);
      return new RegExp(`\\| ${escapeRegExp(row)} +\\| ${escapeRegExp(scopes)} +\\|`).test(doc)
        ? null
        : `${row}: ${scopes}`;
    })
    .filter(Boolean);
  expect(missing).toEqual([]);
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
