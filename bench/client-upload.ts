import { type ChildProcess, spawn } from 'node:child_process';
import { createReadStream, createWriteStream } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { createOrganizationWithOwner } from '../cli/admin-commands';
import { freePort } from '../cli/ports';
import { createSql } from '../db';
import { migrate } from '../db/migrate';
import { createClient, uploadSource } from '../sdk';
import { fileSource, nodeFetch } from '../sdk/node';
import { waitReady } from './api-process';
import { generated, putChunk } from './upload-protocol';

/**
 * Client-side upload: one file through the SDK (`uploadSource` over `fileSource`) and through
 * `sps upload`, beside a raw client of the resumable protocol (the bench/upload client: 64 MiB
 * PUTs streamed from the file) in the same run, against one API process. Each client runs in
 * its own process; its peak RSS (GNU time's maximum resident set) is the client's memory, and
 * two file sizes show whether it stays flat as the file grows. Throughput is wall time per
 * process, start to exit, the same for all three; the raw client runs before and after the
 * other two and its faster run is the reference.
 * Run with `npm run bench:client-upload [-- --size-mib 2048 --small-mib 256]`.
 */
const MiB = 1024 * 1024;
const RAW_CHUNK = 64 * MiB;
const { values } = parseArgs({
  options: {
    'size-mib': { type: 'string', default: '2048' },
    'small-mib': { type: 'string', default: '256' },
    client: { type: 'string' },
    file: { type: 'string' },
  },
});

/** Child mode: one upload by one client, configured through SPS_BASE_URL and SPS_API_KEY. */
async function runClient(kind: string, file: string): Promise<void> {
  const client = createClient({
    baseUrl: process.env.SPS_BASE_URL!,
    apiKey: process.env.SPS_API_KEY!,
    fetch: nodeFetch,
  });
  const source = await fileSource(file);
  if (kind === 'sdk') {
    await uploadSource(client, source, {});
    return;
  }
  const created = await client.uploads.create({
    filename: source.name,
    fileSize: source.size,
    contentType: 'application/octet-stream',
  });
  for (let offset = 0; offset < source.size; offset += RAW_CHUNK) {
    const length = Math.min(RAW_CHUNK, source.size - offset);
    const status = await putChunk(
      created.uploadUrl!,
      offset,
      length,
      source.size,
      createReadStream(file, { start: offset, end: offset + length - 1, highWaterMark: MiB }),
    );
    if (status !== (offset + length === source.size ? 200 : 308))
      throw new Error(`chunk at ${offset}: HTTP ${status}`);
  }
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) =>
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`client exited ${code}`)))),
  );
}

/** Runs `argv` under GNU time; answers wall seconds and peak RSS in MiB. */
async function measure(argv: string[], env: Record<string, string>, scratch: string) {
  const report = path.join(scratch, 'time.txt');
  const started = performance.now();
  const child = spawn('/usr/bin/time', ['-f', '%M', '-o', report, process.execPath, ...argv], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  await exited(child);
  const seconds = (performance.now() - started) / 1000;
  const rssMib = Number((await readFile(report, 'utf8')).trim().split('\n').at(-1)) / 1024;
  return { seconds, rssMib };
}

async function main() {
  const scratch = process.env.SPS_TEST_SCRATCH!;
  const adminUrl = process.env.TEST_DATABASE_URL!;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe('CREATE DATABASE bench_client_upload');
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = '/bench_client_upload';
  const sql = createSql(url.toString(), { max: 2 });
  await migrate(sql);
  const key = await createOrganizationWithOwner(sql, { name: 'bench', email: 'bench@example.com' });
  await sql.end();

  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const objects = path.join(scratch, 'objects');
  // No worker: ingest of these random bytes would compete with the uploads for the CPU.
  const api = spawn(process.execPath, [path.join(__dirname, '..', 'cli', 'api.js')], {
    env: {
      ...process.env,
      DATABASE_URL: url.toString(),
      TEMPORAL_ADDRESS: process.env.TEST_TEMPORAL_ADDRESS!,
      TEMPORAL_TASK_QUEUE_PREFIX: 'bench-client',
      SIGNING_SECRET: 'b'.repeat(40),
      PORT: String(port),
      STORAGE_FS_ROOT: objects,
      LOG_LEVEL: 'warn',
      UPLOAD_MAX_BYTES: String(64 * 1024 * MiB),
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const clientEnv = {
    SPS_BASE_URL: baseUrl,
    SPS_API_KEY: String(key.apiKey),
    XDG_CONFIG_HOME: path.join(scratch, 'config'),
    XDG_STATE_HOME: path.join(scratch, 'state'),
  };
  const rows = [];
  try {
    await waitReady(baseUrl);
    for (const mib of [Number(values['small-mib']), Number(values['size-mib'])]) {
      const file = path.join(scratch, `slide-${mib}.bin`);
      await pipeline(generated(mib * MiB), createWriteStream(file));
      const rawArgs = [__filename, '--client', 'raw', '--file', file];
      const before = await measure(rawArgs, clientEnv, scratch);
      const sdk = await measure([__filename, '--client', 'sdk', '--file', file], clientEnv, scratch);
      const bin = path.join(__dirname, '..', '..', 'cli', 'sps', 'bin.js');
      const cli = await measure([bin, 'upload', file, '--json'], clientEnv, scratch);
      const after = await measure(rawArgs, clientEnv, scratch);
      // The raw client runs first and last; the faster of the two is the reference, so that
      // neither a cold first run nor a filling disk flatters the clients measured between.
      const raw = before.seconds <= after.seconds ? before : after;
      rows.push({ mib, raw, sdk, cli });
      await rm(file);
      await rm(objects, { recursive: true, force: true });
    }
  } finally {
    api.kill('SIGTERM');
  }
  const speed = (mib: number, run: { seconds: number }) => (mib / run.seconds).toFixed(1);
  console.log('\nbench/client-upload: one file per client process over loopback (raw = bench/upload client)');
  console.table(
    rows.map(({ mib, raw, sdk, cli }) => ({
      file: `${mib} MiB`,
      'raw MiB/s': speed(mib, raw),
      'SDK MiB/s': speed(mib, sdk),
      'sps MiB/s': speed(mib, cli),
      'SDK/raw': (raw.seconds / sdk.seconds).toFixed(2),
      'sps/raw': (raw.seconds / cli.seconds).toFixed(2),
      'raw RSS MiB': raw.rssMib.toFixed(0),
      'SDK RSS MiB': sdk.rssMib.toFixed(0),
      'sps RSS MiB': cli.rssMib.toFixed(0),
    })),
  );
}

if (values.client) {
  runClient(values.client, values.file!).catch((err) => {
    console.error(err);
    process.exit(1);
  });
} else {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
