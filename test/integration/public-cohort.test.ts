import { request } from 'node:http';
import { runAdminCommand } from '../../cli/admin-commands';
import { creditSummary } from '../../db/credits';
import { apiClient } from '../support/http';
import { insertSampleWithResults, publish, type StoredSample } from '../support/public-samples';
import { insertSample } from '../support/samples';
import { createTenant, startStack, type Tenant, type TestStack } from '../support/stack';

/**
 * The public cohort: publishing by the admin command, the three scopes of the sample list,
 * and the byte proxy and thumbnail that every organization may read, on a real database,
 * store and HTTP.
 */
let stack: TestStack;
let other: Tenant;
let published: StoredSample;
let publicId: string;
let asOwner: ReturnType<typeof apiClient>;
let asOther: ReturnType<typeof apiClient>;

/** A request sent byte for byte (fetch would normalise `..` and percent-escapes away). */
function rawGet(path: string, apiKey: string): Promise<{ status: number; body: string }> {
  const url = new URL(stack.baseUrl);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path, headers: { authorization: `Bearer ${apiKey}` } },
      (res) => {
        let body = '';
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

beforeAll(async () => {
  stack = await startStack();
  other = await createTenant(stack.sql, { credits: 50 });
  asOwner = apiClient(stack.api, stack.tenant.apiKey);
  asOther = apiClient(stack.api, other.apiKey);
  published = await insertSampleWithResults(stack.sql, stack.store, {
    organizationId: stack.tenant.organizationId,
    createdBy: stack.tenant.userId,
    name: 'Tonsil atlas',
  });
  publicId = await publish(stack.sql, published.sampleId, [
    '--markers',
    'CD3,PANCK',
    '--name',
    'Public tonsil',
  ]);
}, 60_000);
afterAll(async () => {
  await stack?.close();
});

describe('publishing', () => {
  test('a ready sample with a completed prediction gets a publicId and fields.public; markers are pinned', async () => {
    const detail = await asOwner('GET', `/samples/${published.sampleId}`);
    expect(detail.json.fields.public).toBe(true);
    const [row] = await stack.sql<{ markers: string[]; jobId: string }[]>`
      SELECT markers, job_id AS "jobId" FROM public_samples WHERE public_id = ${publicId}`;
    expect(row).toEqual({ markers: ['CD3', 'PANCK'], jobId: published.jobId });
  });

  test('refused: a sample without results, a marker the job did not predict', async () => {
    const bare = await insertSample(stack.sql, { organizationId: stack.tenant.organizationId });
    await expect(publish(stack.sql, bare)).rejects.toThrow(/only a ready sample .* with its H&E pyramid/);
    const unpredicted = await insertSampleWithResults(stack.sql, stack.store, {
      organizationId: stack.tenant.organizationId,
      createdBy: stack.tenant.userId,
    });
    await stack.sql`UPDATE jobs SET status = 'failed', results_available = false WHERE id = ${unpredicted.jobId}`;
    await expect(publish(stack.sql, unpredicted.sampleId)).rejects.toThrow(/no completed prediction/);
    const other = await insertSampleWithResults(stack.sql, stack.store, {
      organizationId: stack.tenant.organizationId,
      createdBy: stack.tenant.userId,
    });
    await expect(publish(stack.sql, other.sampleId, ['--markers', 'CD20'])).rejects.toThrow(
      /did not predict: CD20/,
    );
  });

  test('the public flag cannot be written through PATCH', async () => {
    const patched = await asOwner('PATCH', `/samples/${published.sampleId}`, { fields: { public: false } });
    expect(patched.status).toBe(403);
    expect(patched.json.error).toBe('read_only_field');
  });
});

describe('GET /public/samples/{publicId}/zarr/{path}', () => {
  test('serves the root, he/ and the pinned markers to another organization, with types and ETags', async () => {
    const root = await asOther('GET', `/public/samples/${publicId}/zarr/zarr.json`);
    expect(root.status).toBe(200);
    expect(root.headers.get('content-type')).toMatch(/^application\/json/);
    expect(root.json.attributes.ome.multiscales.map((m: { name: string }) => m.name)).toEqual([
      'CD3',
      'PANCK',
    ]);
    // Navigable as a prediction store is: the top-level copy Strand's clients read, a markers group.
    expect(root.json.attributes.multiscales).toEqual(root.json.attributes.ome.multiscales);
    const markersGroup = await asOther('GET', `/public/samples/${publicId}/zarr/markers/zarr.json`);
    expect(markersGroup.json).toEqual({ zarr_format: 3, node_type: 'group', attributes: {} });
    expect(root.json.attributes.publicSample).toEqual({ publicId, he: 'he/', markers: ['CD3', 'PANCK'] });
    expect(root.text).not.toContain('CD8');
    expect(root.text).not.toContain(published.sampleId);

    const he = await fetch(`${stack.api}/public/samples/${publicId}/zarr/he/0/c/0/0/0`, {
      headers: { authorization: `Bearer ${other.apiKey}` },
    });
    expect(he.status).toBe(200);
    expect(he.headers.get('content-type')).toBe('application/octet-stream');
    expect(Buffer.from(await he.arrayBuffer()).equals(published.heChunk)).toBe(true);
    const etag = he.headers.get('etag')!;
    expect(etag).toMatch(/^"[\w-]+"$/);

    const again = await asOther('GET', `/public/samples/${publicId}/zarr/he/0/c/0/0/0`, undefined, {
      'if-none-match': etag,
    });
    expect(again.status).toBe(304);

    const marker = await fetch(`${stack.api}/public/samples/${publicId}/zarr/markers/CD3/0/c/0/0/0`, {
      headers: { authorization: `Bearer ${other.apiKey}`, range: 'bytes=100-199' },
    });
    expect(marker.status).toBe(206);
    expect(marker.headers.get('content-range')).toBe(`bytes 100-199/${published.markerChunk.length}`);
    expect(Buffer.from(await marker.arrayBuffer()).equals(published.markerChunk.subarray(100, 200))).toBe(
      true,
    );

    const markerGroup = await asOther('GET', `/public/samples/${publicId}/zarr/markers/PANCK/zarr.json`);
    expect(markerGroup.status).toBe(200);
    expect(markerGroup.headers.get('content-type')).toMatch(/^application\/json/);
  });

  test('everything else is denied: unpinned markers, other namespaces, traversal, encoded slashes', async () => {
    const base = `/api/v1/public/samples/${publicId}/zarr`;
    const denied = [
      'markers/CD8/zarr.json',
      'markers/CD8/0/c/0/0/0',
      'markers/zarr.json/x',
      'markers/CD3',
      'he',
      'tissue/mask.png',
      'thumbnail.jpg',
      'original/slide.svs',
      'he/../thumbnail.jpg',
      'he/../../jobs',
      'markers/CD3/../CD8/zarr.json',
      'he/%2e%2e/thumbnail.jpg',
      'he%2F..%2Fthumbnail.jpg',
      'markers%2FCD8%2Fzarr.json',
      'he/0%2Fc/0/0/0',
      'he/.%2e/thumbnail.jpg',
      'he//0/c/0/0/0',
      'he/./0/c/0/0/0',
      'he%5C..%5Cthumbnail.jpg',
    ];
    for (const path of denied) {
      const answer = await rawGet(`${base}/${path}`, other.apiKey);
      expect({ path, status: answer.status }).toEqual({ path, status: 403 });
      expect(JSON.parse(answer.body).error).toBe('forbidden');
    }
    expect((await rawGet(`${base}/he/0/c/9/9/9`, other.apiKey)).status).toBe(404);
  });

  test('an unknown publicId, or a sample id, is 404; no credential is 401; reads never touch credits', async () => {
    const before = await creditSummary(stack.sql, other.organizationId);
    expect((await asOther('GET', `/public/samples/${published.sampleId}/zarr/zarr.json`)).status).toBe(404);
    expect((await asOther('GET', `/public/samples/${published.jobId}/thumbnail`)).status).toBe(404);
    expect((await fetch(`${stack.api}/public/samples/${publicId}/zarr/zarr.json`)).status).toBe(401);
    for (let i = 0; i < 5; i += 1) await asOther('GET', `/public/samples/${publicId}/zarr/he/0/c/0/0/0`);
    expect(await creditSummary(stack.sql, other.organizationId)).toEqual(before);
  });

  test('the thumbnail is a JPEG', async () => {
    const answer = await fetch(`${stack.api}/public/samples/${publicId}/thumbnail`, {
      headers: { authorization: `Bearer ${other.apiKey}` },
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe('image/jpeg');
    expect(Buffer.from(await answer.arrayBuffer()).equals(published.thumbnail)).toBe(true);
  });
});

describe('a public handle is not an owned sample', () => {
  test('every owned-sample endpoint refuses the publicId with 404, also for the owner', async () => {
    for (const call of [asOwner, asOther]) {
      const answers = await Promise.all([
        call('GET', `/samples/${publicId}`),
        call('PATCH', `/samples/${publicId}`, { name: 'x' }),
        call('DELETE', `/samples/${publicId}`),
        call('POST', `/samples/${publicId}/restore`),
        call('PATCH', `/samples/${publicId}/expiration`, { neverExpire: true }),
        call('PATCH', '/samples/expiration', { sampleIds: [publicId], neverExpire: true }),
        call('GET', `/samples/${publicId}/segmentation`),
        call('POST', `/samples/${publicId}/segmentation`),
        call('GET', `/uploads/${publicId}`),
        call('POST', '/predict', { uploadId: publicId, markers: ['CD3'], dryRun: true }),
      ]);
      expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 404));
    }
    // Another organization cannot reach the sample behind it either.
    expect((await asOther('GET', `/samples/${published.sampleId}`)).status).toBe(404);
  });
});

describe('GET /samples scopes', () => {
  let otherOwned: string;
  beforeAll(async () => {
    otherOwned = await insertSample(stack.sql, {
      organizationId: other.organizationId,
      filename: 'own-slide.svs',
      createdAt: new Date(Date.now() - 60_000),
    });
  });

  test('scope=public: public rows only, ownership public, id = publicId, only the public field', async () => {
    const page = await asOther('GET', '/samples?scope=public');
    expect(page.status).toBe(200);
    const row = page.json.items.find((item: { id: string }) => item.id === publicId);
    expect(row).toMatchObject({ ownership: 'public', name: 'Public tonsil', fields: { public: true } });
    expect(Object.keys(row.fields)).toEqual(['public']);
    expect(page.json.items.every((item: { ownership: string }) => item.ownership === 'public')).toBe(true);
    expect(page.text).not.toContain(published.sampleId);
    expect(page.text).not.toContain(stack.tenant.organizationId);
  });

  test('scope=public takes only q: any other facet is 400', async () => {
    expect(
      (await asOther('GET', '/samples?scope=public&q=tonsil')).json.items.map((i: { id: string }) => i.id),
    ).toEqual([publicId]);
    expect((await asOther('GET', '/samples?scope=public&q=nothing-like-it')).json.items).toEqual([]);
    for (const facet of [
      'status=ready',
      'workflow=has_results',
      'marker=CD3:completed',
      'uploaded_to=2030-01-01',
    ]) {
      const answer = await asOther('GET', `/samples?scope=public&${facet}`);
      expect({ facet, status: answer.status, error: answer.json.error }).toEqual({
        facet,
        status: 400,
        error: 'invalid_request',
      });
    }
  });

  test('scope=all: owned rows first, then public ones; a non-q facet drops the public block', async () => {
    const all = await asOther('GET', '/samples?scope=all');
    const ids = all.json.items.map((item: { id: string }) => item.id);
    expect(ids.indexOf(otherOwned)).toBeLessThan(ids.indexOf(publicId));
    expect(all.json.items.find((i: { id: string }) => i.id === otherOwned).ownership).toBe('mine');
    const filtered = await asOther('GET', '/samples?scope=all&status=ready');
    expect(filtered.json.items.map((item: { ownership: string }) => item.ownership)).toEqual(['mine']);
  });

  test('scope=all for the owner: its public sample once, as the owned row', async () => {
    const all = await asOwner('GET', '/samples?scope=all&limit=100');
    const rows = all.json.items.filter(
      (item: { id: string }) => item.id === published.sampleId || item.id === publicId,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ ownership: 'mine', id: published.sampleId, fields: { public: true } });
  });

  test('scope=all pages across the owned and the public block without repeats or gaps', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const query: string = `/samples?scope=all&limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
      const page = await asOther('GET', query);
      expect(page.status).toBe(200);
      seen.push(...page.json.items.map((item: { id: string }) => item.id));
      cursor = page.json.nextCursor;
    } while (cursor);
    const whole = (await asOther('GET', '/samples?scope=all&limit=100')).json.items.map(
      (i: { id: string }) => i.id,
    );
    expect(seen).toEqual(whole);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toContain(publicId);
    expect(seen).toContain(otherOwned);
  });

  test('unpublishing takes the sample out at once', async () => {
    const second = await insertSampleWithResults(stack.sql, stack.store, {
      organizationId: stack.tenant.organizationId,
      createdBy: stack.tenant.userId,
    });
    const id = await publish(stack.sql, second.sampleId);
    expect((await asOther('GET', `/public/samples/${id}/zarr/zarr.json`)).status).toBe(200);
    await runAdminCommand(stack.sql, ['sample', 'unpublish', '--sample', second.sampleId]);
    expect((await asOther('GET', `/public/samples/${id}/zarr/zarr.json`)).status).toBe(404);
    expect(
      (await asOther('GET', '/samples?scope=public')).json.items.map((i: { id: string }) => i.id),
    ).not.toContain(id);
    expect((await asOwner('GET', `/samples/${second.sampleId}`)).json.fields.public).toBe(false);
  });
});
