import { storeKeys } from '../../../sdk/store';
import { retryAfterMs } from '../../../sdk/transport';

test('storeKeys: group metadata of every ancestor, each level, every chunk key of its grid', async () => {
  const documents: Record<string, unknown> = {
    'zarr.json': {
      node_type: 'group',
      attributes: {
        ome: {
          multiscales: [{ name: 'CD3', datasets: [{ path: 'markers/CD3/0' }, { path: 'markers/CD3/1' }] }],
        },
      },
    },
    'markers/CD3/0/zarr.json': {
      node_type: 'array',
      shape: [1, 1000, 600],
      chunk_grid: { name: 'regular', configuration: { chunk_shape: [1, 512, 512] } },
      chunk_key_encoding: { name: 'default', configuration: { separator: '/' } },
    },
    'markers/CD3/1/zarr.json': {
      node_type: 'array',
      shape: [1, 500, 300],
      chunk_grid: { name: 'regular', configuration: { chunk_shape: [1, 512, 512] } },
      chunk_key_encoding: { name: 'v2', configuration: { separator: '.' } },
    },
  };
  const keys = await storeKeys(async (key) => documents[key]);
  expect(keys.sort()).toEqual(
    [
      'zarr.json',
      'markers/zarr.json',
      'markers/CD3/zarr.json',
      'markers/CD3/0/zarr.json',
      'markers/CD3/0/c/0/0/0',
      'markers/CD3/0/c/0/0/1',
      'markers/CD3/0/c/0/1/0',
      'markers/CD3/0/c/0/1/1',
      'markers/CD3/1/zarr.json',
      'markers/CD3/1/0.0.0',
    ].sort(),
  );
});

test('retryAfterMs reads delay seconds and HTTP dates, and nothing else', () => {
  const now = Date.parse('2026-11-26T00:00:00Z');
  expect(retryAfterMs('3', now)).toBe(3000);
  expect(retryAfterMs('Thu, 26 Nov 2026 00:00:05 GMT', now)).toBe(5000);
  expect(retryAfterMs('Wed, 25 Nov 2026 00:00:00 GMT', now)).toBe(0);
  expect(retryAfterMs(null, now)).toBeUndefined();
  expect(retryAfterMs('soon', now)).toBeUndefined();
});
