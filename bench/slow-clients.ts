import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import path from 'node:path';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { createOrganizationWithOwner } from '../cli/admin-commands';
import { freePort } from '../cli/ports';
import { createSql } from '../db';
import { migrate } from '../db/migrate';
import { rssMiB, waitReady } from './api-process';

/**
 * A real client's requests (`GET /api/v1/samples`, sequential) to one API process (`sps api`,
 * default limits but the per-address cap) while a swarm of slow connections holds it: each
 * trickles one byte a second, half of them request headers, half a sign-in form body (neither
 * can be authenticated). The swarm comes from `--addresses` loopback addresses, `--per-address`
 * connections each, plus twice that many from one address, half of which the cap refuses. Prints the
 * client's latency without and with the swarm, its failures, how many slow connections the
 * process held and refused, and its memory.
 * Run with `npm run bench:slow-clients [-- --addresses 20 --per-address 50 --requests 300]`.
 */
const { values } = parseArgs({
  options: {
    addresses: { type: 'string', default: '20' },
    'per-address': { type: 'string', default: '50' },
    requests: { type: 'string', default: '300' },
  },
});
const addressCount = Number(values.addresses);
const perAddress = Number(values['per-address']);
const requestCount = Number(values.requests);
const adminUrl = process.env.TEST_DATABASE_URL!;
const temporalAddress = process.env.TEST_TEMPORAL_ADDRESS!;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface SlowConnection {
  socket: Socket;
  closedEarly: boolean;
}

/** One connection from `localAddress` that sends `start`, then one byte of `drip` a second. */
function slowConnection(
  port: number,
  localAddress: string,
  start: string,
  drip: string,
): Promise<SlowConnection> {
  return new Promise((resolve) => {
    const connection: SlowConnection = {
      socket: connect({ host: '127.0.0.1', port, localAddress }),
      closedEarly: false,
    };
    const timer = setInterval(() => {
      if (!connection.socket.destroyed) connection.socket.write(drip);
    }, 1000);
    connection.socket.on('error', () => {});
    connection.socket.on('close', () => {
      clearInterval(timer);
      connection.closedEarly = true;
    });
    connection.socket.once('connect', () => {
      connection.socket.write(start);
      resolve(connection);
    });
  });
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function measure(url: string, apiKey: string): Promise<{ ms: number[]; failures: number }> {
  const ms: number[] = [];
  let failures = 0;
  for (let i = 0; i < requestCount; i++) {
    const started = performance.now();
    try {
      const response = await fetch(url, { headers: { authorization: `Bearer ${apiKey}` } });
      await response.arrayBuffer();
      if (response.status !== 200) failures++;
    } catch {
      failures++;
    }
    ms.push(performance.now() - started);
  }
  return { ms: ms.sort((a, b) => a - b), failures };
}

async function main() {
  const database = `bench_slow_clients_${randomBytes(3).toString('hex')}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${database}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  const sql = createSql(url.toString(), { max: 2 });
  await migrate(sql);
  const tenant = await createOrganizationWithOwner(sql, { name: 'bench', email: 'bench@example.com' });

  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const api: ChildProcess = spawn(process.execPath, [path.join(__dirname, '..', 'cli', 'api.js')], {
    env: {
      ...process.env,
      DATABASE_URL: url.toString(),
      TEMPORAL_ADDRESS: temporalAddress,
      SIGNING_SECRET: 'b'.repeat(40),
      PORT: String(port),
      LOG_LEVEL: 'error',
      HTTP_MAX_CONNECTIONS_PER_ADDRESS: String(perAddress),
      RATE_LIMIT_PER_SECOND: '100000',
      RATE_LIMIT_BURST: '100000',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const swarm: SlowConnection[] = [];
  const refused: SlowConnection[] = [];
  try {
    await waitReady(baseUrl);
    const samples = `${baseUrl}/api/v1/samples`;
    const apiKey = String(tenant.apiKey);
    await measure(samples, apiKey); // warm-up: JIT, pools
    const quiet = await measure(samples, apiKey);
    const rssQuiet = await rssMiB(api.pid!);

    const headers = `GET /healthz HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n`;
    const form = `POST /oauth2/interaction/some-uid/login HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: 100000\r\n\r\n`;
    for (let a = 0; a < addressCount; a++) {
      const address = `127.0.${1 + Math.floor(a / 250)}.${2 + (a % 250)}`;
      for (let i = 0; i < perAddress; i++) {
        swarm.push(
          await slowConnection(port, address, i % 2 === 0 ? headers : form, i % 2 === 0 ? 'x' : 'a'),
        );
      }
    }
    // One address opens twice its share: the second half is over the cap.
    for (let i = 0; i < 2 * perAddress; i++) {
      refused.push(await slowConnection(port, '127.0.9.9', headers, 'x'));
    }
    await sleep(1000);
    const refusedCount = refused.filter((connection) => connection.closedEarly).length;
    const busy = await measure(samples, apiKey);
    const rssBusy = await rssMiB(api.pid!);
    const held = swarm.filter((connection) => !connection.closedEarly).length;

    const row = (name: string, run: { ms: number[]; failures: number }) =>
      `| ${name} | ${run.ms.length} | ${run.failures} | ${percentile(run.ms, 50).toFixed(1)} | ${percentile(run.ms, 95).toFixed(1)} | ${run.ms.at(-1)!.toFixed(1)} |`;
    console.log('| real client | requests | failures | p50 ms | p95 ms | max ms |');
    console.log('| --- | --- | --- | --- | --- | --- |');
    console.log(row('no slow connections', quiet));
    console.log(row(`${swarm.length} slow connections`, busy));
    console.log(
      `\nslow connections still held after the client's requests: ${held} of ${swarm.length} from ${addressCount} addresses (the default bounds cut the oldest: headers 20 s, bodies 30 s); from one address over the cap of ${perAddress}: ${refusedCount} of ${refused.length} closed (${perAddress} expected)`,
    );
    console.log(`API RSS: ${rssQuiet.toFixed(0)} MiB quiet, ${rssBusy.toFixed(0)} MiB with the swarm`);
  } finally {
    for (const connection of [...swarm, ...refused]) connection.socket.destroy();
    api.kill('SIGTERM');
    await sql.end({ timeout: 5 });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
