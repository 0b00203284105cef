// Reads regions of a sample's stores through the built SDK (the API, bearer header, Range
// requests), for the viewer's tests to compare rendered pixels with. A separate process because
// zarrita is ESM-only and Jest runs our tests as CommonJS.
// Usage: node viewer-store-read.mjs '{"baseUrl","apiKey","sampleId","jobId","layerId","reads":[...]}'
// Each read: {store: "he"|"results"|"mask", name?, level, y: [start, stop], x: [start, stop]}.
import * as zarr from 'zarrita';
import sdk from '../../dist/sdk/index.js';

const input = JSON.parse(process.argv[2]);
const client = sdk.createClient({ baseUrl: input.baseUrl, apiKey: input.apiKey });
const stores = {
  he: () => sdk.openSampleHe(client, input.sampleId),
  results: () => sdk.openResults(client, input.jobId),
  mask: () => sdk.openSegmentationMask(client, input.sampleId, input.layerId),
};
const opened = new Map();
const open = (kind) => {
  if (!opened.has(kind)) opened.set(kind, stores[kind]());
  return opened.get(kind);
};

const reads = [];
for (const read of input.reads) {
  const store = await open(read.store);
  const name = read.name ?? [...store.multiscales.keys()][0];
  const array = await store.open(name, read.level);
  const region = await zarr.get(array, [null, zarr.slice(...read.y), zarr.slice(...read.x)]);
  reads.push({ shape: region.shape, data: Array.from(region.data, Number) });
}
const windows = {};
if (input.jobId) {
  const store = await open('results');
  for (const marker of store.multiscales.keys()) {
    const attributes = await store.groupAttributes(`markers/${marker}`);
    windows[marker] = attributes.ome.omero.channels[0];
  }
}
process.stdout.write(JSON.stringify({ reads, windows }));
