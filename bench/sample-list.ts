import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import pino from 'pino';
import postgres from 'postgres';
import { createApp } from '../api/app';
import { createWorkflowEngine } from '../api/workflow-engine';
import { createOrganizationWithOwner, runAdminCommand } from '../cli/admin-commands';
import { createSql } from '../db';
import { migrate } from '../db/migrate';
import { explainListSamples } from '../db/sample-list';
import { createObjectStore } from '../storage';

/**
 * GET /samples over real HTTP with 100,000 samples and 20 custom fields in one organization:
 * p50/p95 of a faceted call (q + 2 field facets + status) and of paging through 10 pages,
 * beside an unfaceted first page as the reference. Prints the EXPLAIN of the faceted query.
 * Run with `npm run bench:sample-list [-- RUNS]` (200 runs of each call by default).
 */
const SAMPLES = 100_000;
const FIELDS = 20;
const RUNS = Number(process.argv[2] ?? 200);

async function seed(sql: ReturnType<typeof createSql>, organizationId: string, userId: string) {
  const fieldIds: string[] = [];
  for (let i = 0; i < FIELDS; i++) {
    const type = ['text', 'number', 'select', 'date'][i % 4]!;
    const args = [
      'field',
      'create',
      '--org',
      organizationId,
      '--key',
      `f${i}`,
      '--label',
      `Field ${i}`,
      '--type',
      type,
    ];
    if (type === 'select') args.push('--options', 'alpha,beta,gamma,delta');
    fieldIds.push(String((await runAdminCommand(sql, args)).fieldId));
  }
  await sql`
    INSERT INTO samples (organization_id, created_by, filename, name, content_type, file_size, status, uploaded_bytes,
      storage_key, created_at)
    SELECT ${organizationId}, ${userId}, 'slide_' || g || '.svs',
      CASE WHEN g % 3 = 0 THEN 'Case ' || g || (ARRAY['lung','breast','colon','skin','liver'])[1 + g % 5] ELSE NULL END,
      'image/tiff', 1000000 + g, (ARRAY['ready','ready','ready','preprocessing','uploading'])[1 + g % 5], 0,
      'orgs/x/' || g, now() - make_interval(secs => g * 37)
    FROM generate_series(1, ${SAMPLES}) g`;
  for (const [i, id] of fieldIds.entries()) {
    const kind = ['text', 'number', 'select', 'date'][i % 4]!;
    await sql`
      INSERT INTO sample_field_values (sample_id, definition_id, value_text, value_number, value_date)
      SELECT s.id, ${id},
        CASE ${kind} WHEN 'text' THEN 'site ' || (abs(hashtext(s.id::text || ${i})) % 500)
          WHEN 'select' THEN (ARRAY['alpha','beta','gamma','delta'])[1 + abs(hashtext(s.id::text || ${i})) % 4] END,
        CASE WHEN ${kind} = 'number' THEN abs(hashtext(s.id::text || ${i})) % 100 END,
        CASE WHEN ${kind} = 'date' THEN date '2020-01-01' + abs(hashtext(s.id::text || ${i})) % 2000 END
      FROM samples s WHERE s.organization_id = ${organizationId} AND abs(hashtext(s.id::text)) % 10 < 8`;
  }
  await sql`INSERT INTO sample_tags (sample_id, tag)
    SELECT id, (ARRAY['tumor','normal','her2','review'])[1 + abs(hashtext(id::text)) % 4] FROM samples WHERE organization_id = ${organizationId}`;
  await sql`ANALYZE`;
  return fieldIds;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function time(label: string, run: () => Promise<void>) {
  for (let i = 0; i < 10; i++) await run();
  const samples: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    await run();
    samples.push(performance.now() - started);
  }
  samples.sort((a, b) => a - b);
  return {
    call: label,
    'p50 ms': percentile(samples, 50).toFixed(1),
    'p95 ms': percentile(samples, 95).toFixed(1),
  };
}

async function main() {
  const adminUrl = process.env.TEST_DATABASE_URL!;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe('CREATE DATABASE bench_sample_list');
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = '/bench_sample_list';
  const sql = createSql(url.toString(), { max: 10 });
  await migrate(sql);
  const owner = await createOrganizationWithOwner(sql, { name: 'bench', email: 'b@bench.org' });
  const org = owner.organizationId;
  const key = owner.apiKey;
  const seeding = performance.now();
  const fieldIds = await seed(sql, org, owner.userId);
  console.log(
    `seeded ${SAMPLES} samples, ${FIELDS} fields in ${((performance.now() - seeding) / 1000).toFixed(1)} s`,
  );

  const connection = await Connection.connect({ address: process.env.TEST_TEMPORAL_ADDRESS! });
  const secret = randomBytes(32).toString('hex');
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const base = `http://127.0.0.1:${port}`;
  server.on(
    'request',
    createApp({
      sql,
      store: createObjectStore({
        backend: 'fs',
        fs: {
          root: path.join(process.env.SPS_TEST_SCRATCH!, 'o'),
          publicBaseUrl: base,
          signingSecret: secret,
        },
      }),
      workflows: createWorkflowEngine(new Client({ connection }), { taskQueuePrefix: 'bench' }),
      logger: pino({ level: 'silent' }),
      settings: {
        publicBaseUrl: base,
        appUrl: base,
        signingSecret: secret,
        limits: {
          ratePerSecond: 1e6,
          rateBurst: 1e6,
          jsonBodyBytes: 1e6,
          uploadMaxBytes: 1e9,
          uploadChunkMaxBytes: 1e8,
          uploadSessionTtlSeconds: 60,
        },
      },
    }),
  );
  const get = async (query: string) => {
    const response = await fetch(`${base}/api/v1/samples${query}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    if (!response.ok) throw new Error(`${query}: HTTP ${response.status} ${await response.text()}`);
    return (await response.json()) as { items: unknown[]; nextCursor: string | null };
  };
  const clause = (id: string, op: string, value: unknown) =>
    `field=${encodeURIComponent(`${id}:${op}:${JSON.stringify(value)}`)}`;
  const faceted = `?q=lung&status=ready&${clause(fieldIds[1]!, 'gte', 50)}&${clause(fieldIds[2]!, 'eq', 'beta')}`;
  const matches = (await get(`${faceted}&limit=100`)).items.length;

  const rows = [
    await time('first page, no facets (reference)', async () => void (await get(''))),
    await time('q + 2 field facets + status', async () => void (await get(faceted))),
    await time('10 pages of 48, no facets', async () => {
      let cursor: string | null = null;
      for (let page = 0; page < 10; page++)
        cursor = (await get(cursor ? `?cursor=${encodeURIComponent(cursor)}` : '')).nextCursor;
    }),
    await time('10 pages of 48, status=ready + 1 field facet', async () => {
      let cursor: string | null = null;
      const query = `?status=ready&${clause(fieldIds[0]!, 'contains', 'site 1')}`;
      for (let page = 0; page < 10; page++)
        cursor = (await get(`${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)).nextCursor;
    }),
  ];
  console.log(
    `\nbench/sample-list: ${SAMPLES} samples, ${FIELDS} fields, ${RUNS} runs each over HTTP (faceted call matches ${matches}+ rows)`,
  );
  console.table(rows);
  console.log('\nEXPLAIN of the faceted query:');
  console.log(
    await explainListSamples(
      sql,
      {
        organizationId: org,
        q: 'lung',
        statuses: ['ready'],
        fields: [
          {
            definition: { id: fieldIds[1]!, valueType: 'number', storage: 'value_table' },
            operator: 'gte',
            value: 50,
          },
          {
            definition: { id: fieldIds[2]!, valueType: 'select', storage: 'value_table' },
            operator: 'eq',
            value: 'beta',
          },
        ],
      },
      49,
    ),
  );
  server.close();
  await connection.close();
  await sql.end();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
