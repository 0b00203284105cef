// Opens a job's prediction store through the built SDK's zarrita reader and reads a region; then
// an altered link of it, an expired one with and without renewal, and the sample's H&E with a
// credential that changes after the store was opened.
// A separate process because zarrita is ESM-only and Jest runs our tests as CommonJS.
// Usage: node sdk-store-read.mjs BASE_URL API_KEY JOB_ID SAMPLE_ID EXPIRED_LINK
import * as zarr from 'zarrita';
import sdk from '../../dist/sdk/index.js';

const [baseUrl, apiKey, jobId, sampleId, expiredLink] = process.argv.slice(2);
const client = sdk.createClient({ baseUrl, apiKey });
const refusal = (promise) =>
  promise.then(
    () => null,
    (err) => ({ name: err.name, code: err.code, status: err.status, message: err.message }),
  );
const sumOf = (data) => data.reduce((n, value) => n + value, 0);

const store = await sdk.openResults(client, jobId);
const markers = [...store.multiscales.keys()];
const array = await store.open(markers[0], 0);
const region = await zarr.get(array, [null, zarr.slice(0, 64), zarr.slice(0, 64)]);
const whole = sumOf((await zarr.get(array, [null, null, null])).data);

// A link whose token was altered: the service's refusal, not zarrita's bare status.
const { resultUrl } = await client.jobs.results(jobId);
const tampered = resultUrl.replace(/\/stores\/([^/]+)\//, (_, token) => `/stores/${token.slice(0, -2)}xx/`);
const refused = await refusal(sdk.openStoreLink(tampered));

// An expired link: refused as it is; with `renew`, every read goes on under one fresh link.
const expiredRefused = await refusal(sdk.openStoreLink(expiredLink));
let renewals = 0;
const renewed = await sdk.openStoreLink(expiredLink, {
  renew: async () => {
    renewals += 1;
    return (await client.jobs.results(jobId)).resultUrl;
  },
});
const renewedArrays = await Promise.all(markers.map((marker) => renewed.open(marker, 0)));
const renewedSums = await Promise.all(
  renewedArrays.map(async (a) => sumOf((await zarr.get(a, [null, null, null])).data)),
);

// The H&E store asks for the credential on every read, not once when opened.
let key = apiKey;
const he = await sdk.openSampleHe(sdk.createClient({ baseUrl, apiKey: () => key }), sampleId);
const heName = [...he.multiscales.keys()][0];
const heLevels = he.multiscales.get(heName).length;
const heArray = await he.open(heName, heLevels - 1);
key = 'sps_notakeynotakeynotakeynotakeynotakeynotakey';
const heRefused = await refusal(zarr.get(heArray, [null, null, null]));
key = apiKey;
const heRead = (await zarr.get(heArray, [null, null, null])).shape;

process.stdout.write(
  JSON.stringify({
    markers,
    shape: array.shape,
    dtype: array.dtype,
    region: region.shape,
    finite: Number.isFinite(sumOf(region.data)),
    whole,
    refused,
    expiredRefused,
    renewals,
    renewedSums,
    heRefused,
    heRead,
    heShape: heArray.shape,
  }),
);
