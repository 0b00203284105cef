import { randomUUID } from 'node:crypto';
import { resolveKey } from '../../../storage';
import { fileKeySegment, objectKeys } from '../../../storage/locator';

/** Every filename `POST /uploads` accepts must give keys that every backend accepts. */
const org = randomUUID();
const sample = randomUUID();
const keysOf = (filename: string) => [
  objectKeys.originalUpload(org, sample, filename),
  objectKeys.deidentified(org, sample, filename),
];

describe('fileKeySegment', () => {
  test.each([
    'slide.svs',
    'CMU-1-Small-Region.svs',
    'name with spaces ünïcødé 🧪.tiff',
    '.hidden.ndpi',
    '..x',
    'x'.repeat(255),
  ])('keeps the valid segment %j unchanged, so stored layouts keep their keys', (filename) => {
    expect(fileKeySegment(filename)).toBe(filename);
    expect(objectKeys.originalUpload(org, sample, filename)).toBe(
      `orgs/${org}/samples/${sample}/original/${filename}`,
    );
  });

  test.each([
    ['..', 'upload'],
    ['.', 'upload'],
    ['\x01', '_'],
    ['a\x01b.svs', 'a_b.svs'],
    ['slide\u0085.svs', 'slide_.svs'],
    ['tab\there.svs', 'tab_here.svs'],
    ['lone \ud800 surrogate.svs', 'lone _ surrogate.svs'],
  ])('cleans %j to %j', (filename, segment) => {
    expect(fileKeySegment(filename)).toBe(segment);
    for (const key of keysOf(filename)) expect(resolveKey(key)).toBe(key);
  });

  test('255 emoji (over 1,024 bytes of key): shortened to 255 bytes at a character boundary, keeping the extension', () => {
    const filename = `${'🧪'.repeat(251)}.svs`;
    const segment = fileKeySegment(filename);
    expect(Buffer.byteLength(segment, 'utf8')).toBeLessThanOrEqual(255);
    expect(segment.endsWith('.svs')).toBe(true);
    expect(segment.slice(0, -4)).toBe('🧪'.repeat(62));
    for (const key of keysOf(filename)) expect(resolveKey(key)).toBe(key);
  });

  test('a long name without an extension is shortened too', () => {
    const segment = fileKeySegment('é'.repeat(200));
    expect(segment).toBe('é'.repeat(127));
  });

  test('any string of up to 255 code points gives valid keys', () => {
    // Code points from every range a hostile name would use: controls, separators, dots,
    // surrogates (paired and lone), multi-byte letters, emoji.
    const alphabet = [
      '.',
      '/',
      '\\',
      '\0',
      '\x01',
      '\x7f',
      '\u0085',
      '\u2028',
      'a',
      'é',
      '中',
      '🧪',
      '\ud800',
      '\udfff',
      ' ',
    ];
    let seed = 7;
    const next = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed;
    };
    for (let run = 0; run < 2000; run += 1) {
      const length = 1 + (next() % 255);
      const filename = Array.from({ length }, () => alphabet[next() % alphabet.length]).join('');
      for (const key of keysOf(filename)) expect(() => resolveKey(key)).not.toThrow();
    }
  });
});
