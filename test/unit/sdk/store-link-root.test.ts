import { isSpsError, storeLinkRoot } from '../../../sdk';

test('storeLinkRoot: the store root of a signed store link, keys resolve under it', () => {
  const link = 'https://sps.example.org/stores/eyJzY29wZSI6InN0b3JlIn0.c2lnbmF0dXJl/zarr.json';
  expect(storeLinkRoot(link)).toBe('https://sps.example.org/stores/eyJzY29wZSI6InN0b3JlIn0.c2lnbmF0dXJl/');
});

test('storeLinkRoot: a single-file link or another URL is not a store link', () => {
  for (const url of [
    'https://sps.example.org/files/orgs/o/jobs/j/zarr.json?token=abc.def',
    'https://sps.example.org/stores/abc.def/markers/zarr.json',
    'https://sps.example.org/stores/abc.def/zarr.json?x=1',
    'https://sps.example.org/api/v1/jobs/j/results/files/zarr.json',
  ]) {
    let caught: unknown;
    try {
      storeLinkRoot(url);
    } catch (err) {
      caught = err;
    }
    expect({ url, refused: isSpsError(caught, 'invalid_request') }).toEqual({ url, refused: true });
  }
});
