import { normaliseStorePath } from '../../../api/services/jobs';

describe('normaliseStorePath: a file inside a job store, or nothing', () => {
  test('plain paths, with empty and . segments dropped', () => {
    expect(normaliseStorePath(['.', 'markers', '.', 'CD3', 'zarr.json'])).toBe('markers/CD3/zarr.json');
    expect(normaliseStorePath(['zarr.json'])).toBe('zarr.json');
    expect(normaliseStorePath(['markers', 'CD3', '0', 'c', '0', '0', '0'])).toBe('markers/CD3/0/c/0/0/0');
    expect(normaliseStorePath(['markers', '', 'CD3', 'zarr.json'])).toBe('markers/CD3/zarr.json');
    expect(normaliseStorePath(['markers/CD3', 'zarr.json'])).toBe('markers/CD3/zarr.json');
  });

  test('.. segments, absolute paths, backslashes and control characters name nothing', () => {
    for (const segments of [
      [],
      [''],
      ['..'],
      ['.'],
      ['.', ''],
      ['..', 'other', 'zarr.json'],
      ['markers', '..', '..', 'zarr.json'],
      ['markers/../../x'],
      ['', 'etc', 'passwd'],
      ['/etc/passwd'],
      ['..\\x'],
      ['a\\b'],
      ['a\u0000b'],
      ['.tmp', 'x'],
    ]) {
      expect({ segments, path: normaliseStorePath(segments) }).toEqual({ segments, path: undefined });
    }
  });
});
