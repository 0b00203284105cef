// Opens a job's prediction store through the built SDK's zarrita reader and reads a region,
// then opens an altered link of it.
// A separate process because zarrita is ESM-only and Jest runs our tests as CommonJS.
// Usage: node sdk-store-read.mjs BASE_URL API_KEY JOB_ID
import * as zarr from 'zarrita';
import sdk from '../../dist/sdk/index.js';

const [baseUrl, apiKey, jobId] = process.argv.slice(2);
const client = sdk.createClient({ baseUrl, apiKey });
const store = await sdk.openResults(client, jobId);
const markers = [...store.multiscales.keys()];
const array = await store.open(markers[0], 0);
const region = await zarr.get(array, [null, zarr.slice(0, 64), zarr.slice(0, 64)]);
let sum = 0;
for (const value of region.data) sum += value;
// A link whose token was altered: the service's refusal, not zarrita's bare status.
const { resultUrl } = await client.jobs.results(jobId);
const tampered = resultUrl.replace(/\/stores\/([^/]+)\//, (_, token) => `/stores/${token.slice(0, -2)}xx/`);
const refused = await sdk.openStoreLink(tampered).then(
  () => null,
  (err) => ({ name: err.name, code: err.code, status: err.status, message: err.message }),
);
process.stdout.write(
  JSON.stringify({
    markers,
    shape: array.shape,
    dtype: array.dtype,
    region: region.shape,
    finite: Number.isFinite(sum),
    refused,
  }),
);
