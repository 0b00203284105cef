import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { createOrganizationWithOwner } from '../cli/admin-commands';
import { freePort } from '../cli/ports';
import { createSql } from '../db';
import { migrate } from '../db/migrate';
import { waitReady } from './api-process';
import { generated, putChunk } from './upload-protocol';

/**
 * Upload throughput through the resumable protocol on loopback, and the API process's peak
 * RSS, for a small and a large file: memory must stay flat as the file grows. The reference
 * is a plain streamed write of the same bytes to the same disk, in the same run.
 * Run with `npm run bench:upload [-- --size-mib 2048 --chunk-mib 64]`.
 */
const MiB = 1024 * 1024;
const { values } = parseArgs({
  options: {
    'size-mib': { type: 'string', default: '2048' },
    'chunk-mib': { type: 'string', default: '64' },
  },
});
const sizeMib = Number(values['size-mib']);
const chunkMib = Number(values['chunk-mib']);
const scratch = process.env.SPS_TEST_SCRATCH!;
const adminUrl = process.env.TEST_DATABASE_URL!;
const temporalAddress = process.env.TEST_TEMPORAL_ADDRESS!;

async function peakRssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)![1]) / 1024;
}

async function startProcess(script: string, env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, [path.join(__dirname, '..', 'cli', script)], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return child;
}

async function run(label: string, bytes: number, sqlUrl: string, apiKey: string) {
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const env = {
    DATABASE_URL: sqlUrl,
    TEMPORAL_ADDRESS: temporalAddress,
    TEMPORAL_TASK_QUEUE_PREFIX: 'bench',
    SIGNING_SECRET: 'b'.repeat(40),
    PORT: String(port),
    STORAGE_FS_ROOT: path.join(scratch, 'objects'),
    LOG_LEVEL: 'warn',
    UPLOAD_MAX_BYTES: String(64 * 1024 * MiB),
  };
  const api = await startProcess('api.js', env);
  const worker = await startProcess('worker.js', env);
  try {
    await waitReady(baseUrl);
    const referenceFile = path.join(scratch, 'reference.bin');
    const referenceStart = performance.now();
    await pipeline(generated(bytes), createWriteStream(referenceFile));
    const referenceSeconds = (performance.now() - referenceStart) / 1000;
    await rm(referenceFile);

    const created = await fetch(`${baseUrl}/api/v1/uploads`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        filename: `${label}.bin`,
        fileSize: bytes,
        contentType: 'application/octet-stream',
      }),
    });
    const upload = (await created.json()) as { id: string; uploadUrl: string };
    const started = performance.now();
    for (let offset = 0; offset < bytes; offset += chunkMib * MiB) {
      const length = Math.min(chunkMib * MiB, bytes - offset);
      const status = await putChunk(upload.uploadUrl, offset, length, bytes, generated(length));
      if (status !== (offset + length === bytes ? 200 : 308))
        throw new Error(`chunk at ${offset}: HTTP ${status}`);
    }
    const uploadSeconds = (performance.now() - started) / 1000;
    const rss = await peakRssMiB(api.pid!);
    const sql = createSql(sqlUrl, { max: 1 });
    const assemblyStart = performance.now();
    for (;;) {
      const [row] = await sql`SELECT content_sha256 FROM samples WHERE id = ${upload.id}`;
      if (row?.content_sha256) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const assemblySeconds = (performance.now() - assemblyStart) / 1000;
    await sql.end();
    const mib = bytes / MiB;
    return {
      label,
      mib,
      uploadMibPerSecond: mib / uploadSeconds,
      referenceMibPerSecond: mib / referenceSeconds,
      ratio: referenceSeconds / uploadSeconds,
      apiPeakRssMib: rss,
      assemblyAfterLastByteSeconds: assemblySeconds,
    };
  } finally {
    api.kill('SIGTERM');
    worker.kill('SIGTERM');
  }
}

async function main() {
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe('CREATE DATABASE bench_upload');
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = '/bench_upload';
  const sql = createSql(url.toString(), { max: 2 });
  await migrate(sql);
  const key = await createOrganizationWithOwner(sql, { name: 'bench', email: 'bench@example.com' });
  await sql.end();

  const rows = [];
  for (const [label, mib] of [
    ['small', Math.min(256, sizeMib)],
    ['large', sizeMib],
  ] as const) {
    rows.push(await run(label, mib * MiB, url.toString(), String(key.apiKey)));
  }
  console.log(
    `\nbench/upload: resumable protocol over loopback, ${chunkMib} MiB chunks (reference: streamed write of the same bytes to the same disk)`,
  );
  console.table(
    rows.map((row) => ({
      file: `${row.mib} MiB`,
      'upload MiB/s': row.uploadMibPerSecond.toFixed(1),
      'reference MiB/s': row.referenceMibPerSecond.toFixed(1),
      'upload/reference': row.ratio.toFixed(2),
      'API peak RSS MiB': row.apiPeakRssMib.toFixed(0),
      'assembly after last byte s': row.assemblyAfterLastByteSeconds.toFixed(1),
    })),
  );
  const [small, large] = rows;
  console.log(
    `API peak RSS growth from ${small!.mib} MiB to ${large!.mib} MiB: ${(large!.apiPeakRssMib - small!.apiPeakRssMib).toFixed(0)} MiB`,
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
