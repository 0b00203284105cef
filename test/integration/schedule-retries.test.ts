import { randomBytes } from 'node:crypto';
import { type AddressInfo, connect, createServer, type Server } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { ensureSchedules } from '../../cli/runtime';
import { workflowIds } from '../../schemas/temporal';
import { testEnv } from '../support/env';

/**
 * `ensureSchedules` against the real Temporal dev server: a server that cannot answer yet is
 * waited for; any other failure ends the call at once with the Schedule's name.
 */

/**
 * A TCP relay to the dev server that hangs up on every connection until `open()`: a server
 * not reachable yet. `refused` counts the connections it hung up on.
 */
async function lateRelay(target: string) {
  const [host, port] = [
    target.slice(0, target.lastIndexOf(':')),
    Number(target.slice(target.lastIndexOf(':') + 1)),
  ];
  let opened = false;
  let refused = 0;
  const server: Server = createServer((socket) => {
    if (!opened) {
      refused++;
      socket.destroy();
      return;
    }
    const upstream = connect(port, host);
    socket.on('error', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
    socket.pipe(upstream).pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    refused: () => refused,
    open() {
      opened = true;
    },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

const scheduleIds = (prefix: string) =>
  [workflowIds.retentionSweep, workflowIds.trashPurge, workflowIds.maintenance].map(
    (id) => `${prefix}-${id}`,
  );

test('a server not reachable yet is waited for, and the Schedules are made once it answers', async () => {
  const relay = await lateRelay(testEnv().temporalAddress);
  // Without the SDK's own gRPC retries: the waiting under test is ensureSchedules'.
  const connection = Connection.lazy({ address: relay.address, interceptors: [] });
  const direct = await Connection.connect({ address: testEnv().temporalAddress });
  const prefix = `t${randomBytes(4).toString('hex')}`;
  try {
    const made = ensureSchedules(new Client({ connection }), prefix);
    while (relay.refused() === 0) await sleep(50);
    relay.open();
    await made;
    const schedules = new Client({ connection: direct }).schedule;
    for (const id of scheduleIds(prefix)) {
      expect((await schedules.getHandle(id).describe()).action.type).toBe('startWorkflow');
      await schedules.getHandle(id).delete();
    }
  } finally {
    await connection.close();
    await direct.close();
    await relay.close();
  }
}, 60_000);

test('a failure that waiting cannot mend fails at once, naming the Schedule', async () => {
  const connection = await Connection.connect({ address: testEnv().temporalAddress });
  const namespace = `missing-${randomBytes(4).toString('hex')}`;
  const client = new Client({ connection, namespace });
  const creates = jest.spyOn(client.schedule, 'create');
  try {
    const prefix = `t${randomBytes(4).toString('hex')}`;
    const failure = ensureSchedules(client, prefix);
    await expect(failure).rejects.toThrow(
      `could not create or update the Schedule ${prefix}-retention-sweep`,
    );
    await expect(failure).rejects.toThrow(namespace);
    expect(creates).toHaveBeenCalledTimes(1);
  } finally {
    await connection.close();
  }
}, 60_000);
