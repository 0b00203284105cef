import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/**
 * The built pages (`npm test` builds dist/web first) load only small chunks up front: the
 * viewer and zarrita's codecs come later, by dynamic import. The numcodecs chunks that inline
 * their WebAssembly are the only ones over the limit, and no page loads them.
 */
const WEB = path.join(__dirname, '..', '..', '..', 'dist', 'web');
const LIMIT_BYTES = 200 * 1024;

const pages = readdirSync(WEB).filter((file) => file.endsWith('.html'));

test.each(pages)('%s loads no chunk over 200 KiB', (page) => {
  const html = readFileSync(path.join(WEB, page), 'utf8');
  const assets = [...html.matchAll(/(?:src|href)="\.\/(assets\/[^"]+\.js)"/g)].map((match) => match[1]!);
  expect(assets.length).toBeGreaterThan(0);
  const heavy = assets.filter((asset) => statSync(path.join(WEB, asset)).size > LIMIT_BYTES);
  expect(heavy).toEqual([]);
});

test("the chunks over 200 KiB are zarrita's lazy numcodecs codecs", () => {
  const heavy = readdirSync(path.join(WEB, 'assets')).filter(
    (file) => statSync(path.join(WEB, 'assets', file)).size > LIMIT_BYTES,
  );
  expect(heavy.map((file) => file.replace(/-[\w-]+\.js$/, '')).sort()).toEqual(['blosc', 'zstd']);
});
