import { isStorageError, resolveKey } from '../../../storage';
import { resolvePrefix } from '../../../storage/keys';

const rejects = (check: () => unknown) => {
  try {
    check();
  } catch (err) {
    return isStorageError(err, 'InvalidKey');
  }
  return false;
};

describe('resolveKey', () => {
  test.each([
    'a',
    'orgs/o1/samples/s1/original/slide.svs',
    '.zattrs',
    'tiles/0/.zarray',
    'a/..b/c..',
    'name with spaces/ünïcødé 🧪',
    'x'.repeat(1024),
  ])('accepts %j', (key) => {
    expect(resolveKey(key)).toBe(key);
  });

  test.each([
    ['empty', ''],
    ['absolute', '/a/b'],
    ['empty segment', 'a//b'],
    ['trailing slash', 'a/b/'],
    ['dot segment', 'a/./b'],
    ['dot-dot segment', 'a/../b'],
    ['leading dot-dot', '../etc/passwd'],
    ['only dot-dot', '..'],
    ['backslash', 'a\\b'],
    ['backslash traversal', '..\\secret'],
    ['NUL', 'a\0b'],
    ['newline', 'a\nb'],
    ['lone surrogate', 'a\ud800b'],
    ['reserved staging folder', '.tmp/x'],
    ['over 1024 bytes', 'x'.repeat(1025)],
    ['over 1024 bytes in UTF-8, not in characters', 'é'.repeat(513)],
  ])('rejects %s', (_why, key) => {
    expect(rejects(() => resolveKey(key))).toBe(true);
  });

  test('the error names the key and the reason', () => {
    expect(() => resolveKey('a//b')).toThrow(/"a\/\/b".*empty segment/);
  });
});

describe('resolvePrefix', () => {
  test.each(['', 'a', 'a/', 'orgs/o1/sam'])('accepts %j', (prefix) => {
    expect(resolvePrefix(prefix)).toBe(prefix);
  });
  test.each(['/', '/a', 'a//', '../', 'a/./'])('rejects %j', (prefix) => {
    expect(rejects(() => resolvePrefix(prefix))).toBe(true);
  });
});
