import { randomUUID } from 'node:crypto';
import { runAdminCommand } from '../../cli/admin-commands';
import { type Endpoint, type EndpointName, endpoints } from '../../schemas/endpoints';
import { type OAuthScope, oauthScopes } from '../../schemas/enums';
import { requiredScopes, scopeRules } from '../../schemas/scopes';
import { apiClient } from '../support/http';
import { signWithServerKey } from '../support/oauth';
import { insertSampleWithResults, publish } from '../support/public-samples';
import { createTenant, startStack, type Tenant, type TestStack } from '../support/stack';

/**
 * Every bearer endpoint of the endpoint table, called as: no credential, a revoked key,
 * another organization's key, a token lacking each scope it needs, a token for another
 * resource. Each answers its documented status, and no answer carries the owner's ids.
 */
let stack: TestStack;
let intruder: Tenant;
let revokedKey: string;
let ids: { sampleId: string; jobId: string; publicId: string; layerId: string };
let marker: string;

beforeAll(async () => {
  stack = await startStack();
  intruder = await createTenant(stack.sql, { credits: 100 });
  const owned = await insertSampleWithResults(stack.sql, stack.store, {
    organizationId: stack.tenant.organizationId,
    createdBy: stack.tenant.userId,
  });
  ids = {
    sampleId: owned.sampleId,
    jobId: owned.jobId,
    publicId: await publish(stack.sql, owned.sampleId),
    layerId: randomUUID(),
  };
  const key = await runAdminCommand(stack.sql, [
    'key',
    'create',
    '--org',
    stack.tenant.organizationId,
    '--user',
    stack.tenant.userId,
  ]);
  await runAdminCommand(stack.sql, ['key', 'revoke', '--id', String(key.keyId)]);
  revokedKey = String(key.apiKey);
  marker = (await apiClient(stack.api, stack.tenant.apiKey)('GET', '/markers')).json.markers[0].name;
  // The server makes its signing key on first use; any OAuth request does.
  await fetch(`${stack.baseUrl}/oauth2/jwks`);
}, 60_000);
afterAll(async () => {
  await stack?.close();
});

const bearerEndpoints = () =>
  (Object.entries(endpoints) as [EndpointName, Endpoint][]).filter(
    ([, endpoint]) => endpoint.auth === 'bearer',
  );

/** The path of an endpoint with the owner's ids filled in. */
function pathOf(endpoint: Endpoint): string {
  return endpoint.path.replace(/\{(\w+)\}/g, (_all, name: string) => {
    if (name === 'id') return endpoint.path.startsWith('/jobs') ? ids.jobId : ids.sampleId;
    if (name === 'layerId') return ids.layerId;
    if (name === 'publicId') return ids.publicId;
    return 'zarr.json';
  });
}

/** A body that passes validation, so that only the credential decides the answer. */
function bodyOf(name: EndpointName): unknown {
  const bodies: Partial<Record<EndpointName, unknown>> = {
    createUpload: { filename: 'intruder.svs', fileSize: 1000, contentType: 'image/tiff' },
    patchSample: { name: 'renamed' },
    setExpiration: { neverExpire: true },
    bulkExpiration: { sampleIds: [ids.sampleId], neverExpire: true },
    setRetention: { pin: true },
    bulkRetention: { sampleIds: [ids.sampleId], pin: true },
    predict: { uploadId: ids.sampleId, markers: [marker] },
    estimatePrediction: { uploadId: ids.sampleId, markers: [marker] },
  };
  if (name in bodies) return bodies[name];
  // Export requests (rule 6): the selection that also needs samples:read.
  const endpoint: Endpoint = endpoints[name];
  if (endpoint.method === 'post' && endpoint.request?.body) {
    return { format: 'ome-zarr', includeSegmentation: true };
  }
  return undefined;
}

const queryOf = (endpoint: Endpoint) =>
  endpoint.request?.query && 'includeSegmentation' in endpoint.request.query.shape
    ? '?format=ome-zarr&includeSegmentation=true'
    : '';

async function callAs(token: string | undefined, name: EndpointName) {
  const endpoint = endpoints[name];
  const call = apiClient(stack.api, token ?? '');
  const headers: Record<string, string> = token === undefined ? { authorization: '' } : {};
  return call(
    endpoint.method.toUpperCase(),
    `${pathOf(endpoint)}${queryOf(endpoint)}`,
    bodyOf(name),
    headers,
  );
}

/** The owner's ids in an answer, except those the request itself named (an echo is no leak). */
const ownerIdsIn = (text: string, name: EndpointName) => {
  const sent = `${pathOf(endpoints[name])} ${JSON.stringify(bodyOf(name) ?? null)}`;
  return [ids.sampleId, ids.jobId, stack.tenant.organizationId, stack.tenant.userId].filter(
    (id) => text.includes(id) && !sent.includes(id),
  );
};

function tokenFor(scopes: readonly OAuthScope[], overrides: Record<string, unknown> = {}) {
  const now = Math.floor(Date.now() / 1000);
  return signWithServerKey(stack.sql, {
    iss: stack.baseUrl,
    aud: stack.api,
    sub: stack.tenant.userId,
    org_id: stack.tenant.organizationId,
    client_id: 'security-matrix',
    scope: scopes.join(' '),
    iat: now,
    exp: now + 600,
    ...overrides,
  });
}

test('the matrix covers every bearer endpoint', () => {
  expect(bearerEndpoints().length).toBeGreaterThanOrEqual(25);
});

test('no credential, a revoked key, a token for another resource: 401 unauthorized', async () => {
  const foreignResource = await tokenFor(oauthScopes, { aud: 'https://other.example/api/v1' });
  for (const [name] of bearerEndpoints()) {
    for (const [as, token] of [
      ['none', undefined],
      ['revoked key', revokedKey],
      ['other resource', foreignResource],
    ] as const) {
      const answer = await callAs(token, name);
      expect({ name, as, status: answer.status, error: answer.json?.error }).toEqual({
        name,
        as,
        status: 401,
        error: 'unauthorized',
      });
    }
  }
});

test("another organization's key: 404 for the owner's resources, its own view otherwise, never the owner's ids", async () => {
  const ownResultsOrLists: EndpointName[] = [
    'createUpload',
    'listUploads',
    'listSamples',
    'listTrash',
    'listFields',
    'listMarkers',
  ];
  for (const [name, endpoint] of bearerEndpoints()) {
    const answer = await callAs(intruder.apiKey, name);
    const expected = endpoint.path.startsWith('/public/')
      ? 200
      : ownResultsOrLists.includes(name)
        ? answer.status
        : 404;
    expect({ name, status: answer.status }).toEqual({ name, status: expected });
    expect(answer.status).toBeLessThan(500);
    expect({ name, leaked: ownerIdsIn(answer.text, name) }).toEqual({ name, leaked: [] });
  }
});

test('a token lacking any one required scope: 403 insufficient_scope, before anything is read or written', async () => {
  for (const [name, endpoint] of bearerEndpoints()) {
    const query = Object.fromEntries(new URLSearchParams(queryOf(endpoint)));
    const required = requiredScopes(scopeRules[name], { body: bodyOf(name), query });
    expect(required.length).toBeGreaterThan(0);
    for (const missing of required) {
      const answer = await callAs(await tokenFor(oauthScopes.filter((scope) => scope !== missing)), name);
      expect({ name, missing, status: answer.status, error: answer.json?.error }).toEqual({
        name,
        missing,
        status: 403,
        error: 'insufficient_scope',
      });
      expect(answer.json.missingScopes).toEqual([missing]);
    }
  }
  // Nothing was changed by the refused calls.
  const detail = await apiClient(stack.api, stack.tenant.apiKey)('GET', `/samples/${ids.sampleId}`);
  expect(detail.json).toMatchObject({ name: null, trashedAt: null });
});

test('a token holding exactly the required scopes passes the scope check (reads)', async () => {
  for (const [name, endpoint] of bearerEndpoints()) {
    if (endpoint.method !== 'get' || name === 'streamJob') continue;
    const query = Object.fromEntries(new URLSearchParams(queryOf(endpoint)));
    const required = requiredScopes(scopeRules[name], { body: undefined, query });
    const answer = await callAs(await tokenFor(required), name);
    expect({ name, status: answer.status }).not.toEqual({ name, status: 403 });
    expect({ name, status: answer.status }).not.toEqual({ name, status: 401 });
  }
});
