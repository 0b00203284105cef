import { parseArgs } from 'node:util';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { createObjectStore } from '../storage';
import { startMinioBucket } from '../test/support/minio-bucket';
import { cpuSeconds, median, processCpuSeconds } from './cpu';

/**
 * The CPU a worker spends per GiB it stores on S3 in shard-sized objects (PutObject of bodies in
 * memory, as prediction and ingest write shards), through the S3 store against a client with the
 * SDK's defaults (a CRC32 of every body besides the SigV4 SHA-256 the store keeps), in the same
 * run against the same MinIO, rounds alternating. MinIO's own CPU is printed beside each.
 *
 *   npm run bench:s3-puts [-- --object-kib 512 --mib 512 --rounds 4 --in-flight 4]
 */
const { values } = parseArgs({
  options: {
    'object-kib': { type: 'string', default: '512' },
    mib: { type: 'string', default: '512' },
    rounds: { type: 'string', default: '4' },
    'in-flight': { type: 'string', default: '4' },
  },
});
const objectBytes = Number(values['object-kib']) * 1024;
const objects = Math.ceil((Number(values.mib) * 1024 * 1024) / objectBytes);
const inFlight = Number(values['in-flight']);

/** Stores `objects` objects of `body` under `prefix`, `inFlight` at once. */
async function putAll(put: (key: string) => Promise<void>, prefix: string): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < objects) await put(`${prefix}/${next++}`);
    }),
  );
}

interface Round {
  clientCpu: number;
  minioCpu: number;
  seconds: number;
}

async function measure(minioPid: number, run: () => Promise<void>): Promise<Round> {
  const cpu = cpuSeconds();
  const minio = processCpuSeconds(minioPid);
  const started = performance.now();
  await run();
  return {
    seconds: (performance.now() - started) / 1000,
    clientCpu: cpuSeconds() - cpu,
    minioCpu: processCpuSeconds(minioPid) - minio,
  };
}

interface Row {
  round: number;
  client: 'S3 store' | 'SDK defaults';
  measured: Round;
}

function report(rows: Row[], gib: number): void {
  console.log(
    `\nbench/s3-puts: ${objects} objects of ${objectBytes / 1024} KiB (${gib.toFixed(2)} GiB) a round, ${inFlight} at once, MinIO on this machine`,
  );
  console.table(
    rows.map(({ round, client, measured: m }) => ({
      round,
      client,
      'client CPU s/GiB': (m.clientCpu / gib).toFixed(2),
      'MinIO CPU s/GiB': (m.minioCpu / gib).toFixed(2),
      'MiB/s': ((gib * 1024) / m.seconds).toFixed(0),
    })),
  );
  const ratios = [];
  for (let i = 0; i < rows.length; i += 2)
    ratios.push(rows[i]!.measured.clientCpu / rows[i + 1]!.measured.clientCpu);
  console.log(
    `  client CPU, S3 store / SDK defaults: median ${median(ratios).toFixed(2)} (rounds ${ratios.map((r) => r.toFixed(2)).join(', ')})`,
  );
}

async function main(): Promise<void> {
  const bucket = await startMinioBucket('s3-puts');
  const options = bucket.options;
  const store = createObjectStore({ backend: 's3', s3: options });
  const reference = new S3Client({
    endpoint: options.endpoint,
    region: options.region,
    forcePathStyle: true,
    credentials: { accessKeyId: options.accessKeyId!, secretAccessKey: options.secretAccessKey! },
  });
  try {
    const body = Buffer.alloc(objectBytes);
    for (let i = 0; i < body.length; i++) body[i] = (i * 2_654_435_761) >>> 24;
    const clients = {
      'S3 store': (prefix: string) => putAll((key) => store.put(key, body), prefix),
      'SDK defaults': (prefix: string) =>
        putAll(async (key) => {
          await reference.send(new PutObjectCommand({ Bucket: options.bucket, Key: key, Body: body }));
        }, prefix),
    };
    // Both warmed up (connections, the JIT) before the first round; then which goes first alternates.
    for (const [client, put] of Object.entries(clients)) await put(`warm/${client}`);
    const rows: Row[] = [];
    for (let round = 1; round <= Number(values.rounds); round++) {
      const order =
        round % 2 === 1 ? (['S3 store', 'SDK defaults'] as const) : (['SDK defaults', 'S3 store'] as const);
      const measured: Partial<Record<Row['client'], Round>> = {};
      for (const client of order)
        measured[client] = await measure(bucket.minioPid, () => clients[client](`${round}/${client}`));
      for (const client of ['S3 store', 'SDK defaults'] as const)
        rows.push({ round, client, measured: measured[client]! });
    }
    report(rows, (objects * objectBytes) / 2 ** 30);
  } finally {
    reference.destroy();
    await bucket.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
