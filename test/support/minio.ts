import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { type AddressInfo, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const DEFAULT_BIN = '/root/.cache/sps/bin/minio';
const START_LIMIT_MS = 60_000;
const STOP_LIMIT_MS = 10_000;

export interface MinioServer {
  endpoint: string;
  /** The server's process, for benches that read its CPU. */
  pid: number;
  accessKeyId: string;
  secretAccessKey: string;
  stop(): Promise<void>;
}

function minioBinary(): string {
  const bin = process.env.MINIO_BIN ?? DEFAULT_BIN;
  if (!existsSync(bin)) {
    throw new Error(`MinIO not found at ${bin}: set MINIO_BIN, or run \`npm test\` once to build it`);
  }
  return bin;
}

function listenOnAnyPort(server: Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
  });
}

/** Two ports the kernel handed out, held at the same time so that they differ. */
async function freePortPair(): Promise<[number, number]> {
  const servers = [createServer(), createServer()] as const;
  const ports = await Promise.all([listenOnAnyPort(servers[0]), listenOnAnyPort(servers[1])]);
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  return ports;
}

async function isLive(endpoint: string): Promise<boolean> {
  try {
    const response = await fetch(`${endpoint}/minio/health/live`, { signal: AbortSignal.timeout(1_000) });
    return response.status === 200;
  } catch {
    return false;
  }
}

/** Polls the health endpoint; gives up when the process ends or the limit passes. */
async function waitUntilLive(endpoint: string, status: { ended?: string; output: string }): Promise<void> {
  const deadline = Date.now() + START_LIMIT_MS;
  while (!(await isLive(endpoint))) {
    if (status.ended !== undefined)
      throw new Error(`MinIO ${status.ended} before it was live:\n${status.output}`);
    if (Date.now() > deadline)
      throw new Error(`MinIO was not live after ${START_LIMIT_MS} ms:\n${status.output}`);
    await sleep(100);
  }
}

async function terminate(child: ChildProcess): Promise<void> {
  const running = child.pid !== undefined && child.exitCode === null && child.signalCode === null;
  if (!running) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_LIMIT_MS);
  await exited;
  clearTimeout(timer);
}

/** A real MinIO server on free loopback ports with a throwaway data folder. */
export async function startMinio(): Promise<MinioServer> {
  const bin = minioBinary();
  const dataDir = await mkdtemp(path.join(tmpdir(), 'sps-minio-'));
  const [port, consolePort] = await freePortPair();
  const accessKeyId = `test${randomBytes(6).toString('hex')}`;
  const secretAccessKey = randomBytes(24).toString('hex');
  const endpoint = `http://127.0.0.1:${port}`;
  const args = [
    'server',
    dataDir,
    '--address',
    `127.0.0.1:${port}`,
    '--console-address',
    `127.0.0.1:${consolePort}`,
  ];
  const child = spawn(bin, args, {
    env: { ...process.env, MINIO_ROOT_USER: accessKeyId, MINIO_ROOT_PASSWORD: secretAccessKey },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // What MinIO printed and how it ended, to explain a failed start.
  const status: { ended?: string; output: string } = { output: '' };
  const collect = (chunk: Buffer) => {
    status.output = (status.output + chunk.toString()).slice(-4_000);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  child.once('error', (err) => {
    status.ended = `could not be started (${err.message})`;
  });
  child.once('exit', (code, signal) => {
    status.ended ??= `exited (${code ?? signal})`;
  });
  const stop = async () => {
    await terminate(child);
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    await waitUntilLive(endpoint, status);
  } catch (err) {
    await stop();
    throw err;
  }
  return { endpoint, pid: child.pid!, accessKeyId, secretAccessKey, stop };
}
