import { parseRange } from '../../../api/routes/files';
import { parseContentRange } from '../../../api/services/uploads';

describe('parseContentRange', () => {
  test.each([
    ['bytes 0-262143/1000000', { kind: 'chunk', start: 0, end: 262143, total: 1000000 }],
    ['bytes */1000000', { kind: 'query', total: 1000000 }],
    ['bytes 999999-999999/1000000', { kind: 'chunk', start: 999999, end: 999999, total: 1000000 }],
  ])('%s', (header, expected) => {
    expect(parseContentRange(header)).toEqual(expected);
  });
  test.each([
    undefined,
    '',
    'bytes 10-5/100',
    'bytes 0-100/100',
    'items 0-1/2',
    'bytes 0-1/*',
    'bytes -1-2/3',
  ])('refuses %p', (header) => {
    expect(() => parseContentRange(header)).toThrow(/Content-Range/);
  });
});

describe('parseRange', () => {
  test('forms of a single byte range', () => {
    expect(parseRange('bytes=0-9', 100)).toEqual({ offset: 0, length: 10 });
    expect(parseRange('bytes=90-', 100)).toEqual({ offset: 90, length: 10 });
    expect(parseRange('bytes=-5', 100)).toEqual({ offset: 95, length: 5 });
    expect(parseRange('bytes=50-500', 100)).toEqual({ offset: 50, length: 50 });
  });
  test('absent, several ranges or not a range reads the whole object', () => {
    expect(parseRange(undefined, 100)).toBeUndefined();
    expect(parseRange('bytes=0-1,5-6', 100)).toBeUndefined();
    expect(parseRange('bytes=9-5', 100)).toBeUndefined();
    expect(parseRange('items=0-5', 100)).toBeUndefined();
  });
  test.each(['bytes=200-300', 'bytes=100-', 'bytes=-0', 'bytes=0-0'])(
    'a range that selects no byte of a 100-byte file (or of an empty one) is 416: %p',
    (header) => {
      const size = header === 'bytes=0-0' ? 0 : 100;
      expect(() => parseRange(header, size)).toThrow(
        expect.objectContaining({
          code: 'range_not_satisfiable',
          headers: { 'Content-Range': `bytes */${size}` },
        }),
      );
    },
  );
});
