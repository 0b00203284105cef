import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { expressPath } from '../../../api/route';
import { endpoints } from '../../../schemas/endpoints';

const apiDir = path.join(__dirname, '..', '..', '..', 'api');
// The web application's pages (routes/web-app.ts) are HTML for people, not API operations.
const sources = (readdirSync(apiDir, { recursive: true }) as string[])
  .filter((file) => file.endsWith('.ts') && file !== path.join('routes', 'web-app.ts'))
  .map((file) => ({ file, text: readFileSync(path.join(apiDir, file), 'utf8') }));

test('every route is mounted from the endpoint table, so the OpenAPI document covers it', () => {
  const direct = sources.filter(({ text }) => /\b(router|app|v1)\.(get|post|put|patch|delete)\(/.test(text));
  expect(direct.map(({ file }) => file)).toEqual([]);
  const mounted = new Set(
    sources.flatMap(({ text }) =>
      [...text.matchAll(/mount\(\s*\w+,\s*endpoints\.(\w+)/g)].map((match) => match[1]),
    ),
  );
  expect([...mounted].sort()).toEqual(Object.keys(endpoints).sort());
});

test('path templates become express paths; an object key spans slashes', () => {
  expect(expressPath(endpoints.getUpload)).toBe('/uploads/:id');
  expect(expressPath(endpoints.signedFile)).toBe('/files/*key');
});
