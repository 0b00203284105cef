import { setTimeout as sleep } from 'node:timers/promises';
import { runAdminCommand } from '../../cli/admin-commands';
import { ensureSchedules } from '../../cli/runtime';
import type { TransactionSql } from '../../db';
import { restoreSample } from '../../db/sample-details';
import { apiClient } from '../support/http';
import { insertSample } from '../support/samples';
import { createTenant, startStack, type Tenant, type TestStack } from '../support/stack';

interface Caller {
  userId: string;
  call: ReturnType<typeof apiClient>;
}

let stack: TestStack;
let owner: Tenant;
let call: ReturnType<typeof apiClient>;
let member: Caller;
let admin: Caller;
let platformAdmin: Caller;
const DAY = 24 * 3600 * 1000;

/** A user of the owner's organization with an API key, made through the admin commands. */
async function userWithKey(email: string, role: 'admin' | 'member', flags: string[] = []): Promise<Caller> {
  const user = await runAdminCommand(stack.sql, [
    'user',
    'create',
    '--email',
    email,
    '--org',
    owner.organizationId,
    '--role',
    role,
    ...flags,
  ]);
  const key = await runAdminCommand(stack.sql, [
    'key',
    'create',
    '--org',
    owner.organizationId,
    '--user',
    String(user.userId),
  ]);
  return { userId: String(user.userId), call: apiClient(stack.api, String(key.apiKey)) };
}

beforeAll(async () => {
  stack = await startStack({ worker: true });
  owner = await createTenant(stack.sql, { expirationDays: 30 });
  call = apiClient(stack.api, owner.apiKey);
  member = await userWithKey('member@lab.org', 'member');
  admin = await userWithKey('admin@lab.org', 'admin');
  // A plain member of this organization: only the platform flag can let it through the gate.
  platformAdmin = await userWithKey('operator@platform.example', 'member', ['--platform-admin']);
});
afterAll(async () => {
  await stack?.close();
});

const sampleOf = (createdBy: string, extra: Partial<Parameters<typeof insertSample>[1]> = {}) =>
  insertSample(stack.sql, { organizationId: owner.organizationId, createdBy, ...extra });

async function runWorkflow(type: 'retentionSweepWorkflow' | 'trashPurgeWorkflow', asOf: Date) {
  return stack.client.workflow.execute(type, {
    workflowId: `${type}-${asOf.getTime()}-${Math.random()}`,
    taskQueue: `${stack.taskQueuePrefix}-io`,
    args: [{ asOf: asOf.toISOString() }],
  });
}

/** Runs `work` in a transaction and keeps it open (its row locks held) until `commit`. */
async function holdTransaction(work: (tx: TransactionSql) => Promise<unknown>) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let worked!: () => void;
  const done = new Promise<void>((resolve) => {
    worked = resolve;
  });
  const transaction = stack.sql.begin(async (tx) => {
    await work(tx);
    worked();
    await released;
  });
  await Promise.race([done, transaction]);
  return {
    async commit() {
      release();
      await transaction;
    },
  };
}

/** Resolves once some session of this database is blocked on a lock: the other side is waiting. */
async function untilSomeoneWaitsForALock(): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const [row] = await stack.sql`SELECT count(*)::int AS waiting FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock'`;
    if (row!.waiting > 0) return;
    await sleep(50);
  }
  throw new Error('no session waited for a lock within 10 s');
}

const detailOf = async (id: string) => (await call('GET', `/samples/${id}`)).json;

describe('expiration', () => {
  test('an upload takes the organization default (org_default)', async () => {
    const created = await call('POST', '/uploads', {
      filename: 'a.svs',
      fileSize: 10,
      contentType: 'image/tiff',
    });
    const detail = (await call('GET', `/samples/${created.json.id}`)).json;
    expect(detail).toMatchObject({ expiresAtSource: 'org_default', willExpire: true });
    expect(detail.expiresInDays).toBeGreaterThanOrEqual(29);
  });

  test('set a date, pin never-expire, return to the default; each audited with its batch', async () => {
    const id = await sampleOf(owner.userId, { createdAt: new Date(Date.now() - 10 * DAY) });
    const date = new Date(Date.now() + 5 * DAY).toISOString();
    const set = await call('PATCH', `/samples/${id}/expiration`, { expiresAt: date, reason: 'study ends' });
    expect(set.status).toBe(200);
    expect(set.json).toMatchObject({
      id,
      expiresAt: date,
      expiresAtSource: 'custom',
      expirationChangedBy: owner.userId,
    });
    expect(Object.keys(set.json).sort()).toEqual([
      'batchId',
      'expirationChangedAt',
      'expirationChangedBy',
      'expiresAt',
      'expiresAtSource',
      'id',
    ]);
    const never = await call('PATCH', `/samples/${id}/expiration`, { neverExpire: true });
    expect(never.json).toMatchObject({ expiresAt: null, expiresAtSource: 'custom' });
    expect((await call('GET', `/samples/${id}`)).json).toMatchObject({
      willExpire: false,
      expiresInDays: null,
      expiresAtSource: 'custom',
    });
    const back = await call('PATCH', `/samples/${id}/expiration`, { useOrgDefault: true });
    expect(back.json.expiresAtSource).toBe('org_default');
    expect(Math.round((new Date(back.json.expiresAt).getTime() - Date.now()) / DAY)).toBe(20);
    const audit =
      await stack.sql`SELECT batch_id, new_source, reason FROM sample_expiration_audit WHERE sample_id = ${id} ORDER BY id`;
    expect(audit.map((row) => row.new_source)).toEqual(['custom', 'custom', 'org_default']);
    expect(audit[0]!.reason).toBe('study ends');
    expect(audit[0]!.batch_id).toBe(set.json.batchId);
  });

  test.each([
    ['none of the three', { reason: 'x' }],
    ['two of the three', { neverExpire: true, useOrgDefault: true }],
    ['a bad date', { expiresAt: 'tomorrow' }],
    ['neverExpire false', { neverExpire: false }],
  ])('%s is 422', async (_name, body) => {
    const id = await sampleOf(owner.userId);
    expect((await call('PATCH', `/samples/${id}/expiration`, body)).status).toBe(422);
  });

  test('the older names: /retention with pin is /expiration with neverExpire, gate included', async () => {
    const id = await sampleOf(owner.userId);
    const pinned = await call('PATCH', `/samples/${id}/retention`, { pin: true, reason: 'keep it' });
    expect(pinned.status).toBe(200);
    expect(pinned.json).toMatchObject({ id, expiresAt: null, expiresAtSource: 'custom' });
    const dated = await call('PATCH', `/samples/${id}/retention`, { expiresAt: '2031-01-01T00:00:00Z' });
    expect(dated.json).toMatchObject({ expiresAt: '2031-01-01T00:00:00.000Z', expiresAtSource: 'custom' });
    expect((await call('PATCH', `/samples/${id}/retention`, { neverExpire: true })).status).toBe(400);
    expect((await call('PATCH', `/samples/${id}/retention`, { pin: true, useOrgDefault: true })).status).toBe(
      422,
    );
    expect((await member.call('PATCH', `/samples/${id}/retention`, { pin: true })).status).toBe(403);

    const other = await sampleOf(owner.userId);
    const bulk = await call('PATCH', '/samples/retention', { sampleIds: [id, other], pin: true });
    expect(bulk.json).toEqual({ updated: 2, batchId: expect.any(String) });
    expect((await call('GET', `/samples/${other}`)).json).toMatchObject({
      willExpire: false,
      expiresAt: null,
    });
    expect((await call('PATCH', '/samples/retention', { sampleIds: [id], neverExpire: true })).status).toBe(
      400,
    );
  });

  test('the gate: the creator, an owner or admin; another member is 403', async () => {
    const mine = await sampleOf(member.userId);
    const theirs = await sampleOf(owner.userId);
    expect((await member.call('PATCH', `/samples/${mine}/expiration`, { neverExpire: true })).status).toBe(
      200,
    );
    const refused = await member.call('PATCH', `/samples/${theirs}/expiration`, { neverExpire: true });
    expect(refused.status).toBe(403);
    expect(refused.json.error).toBe('forbidden');
    expect((await member.call('POST', `/samples/${theirs}/restore`)).status).toBe(403);
    expect((await member.call('DELETE', `/samples/${theirs}`)).status).toBe(403);
    expect((await call('PATCH', `/samples/${mine}/expiration`, { neverExpire: true })).status).toBe(200);
  });

  test('bulk: one batch for all; all or nothing when one sample fails the gate', async () => {
    const a = await sampleOf(member.userId);
    const b = await sampleOf(member.userId);
    const ok = await member.call('PATCH', '/samples/expiration', { sampleIds: [a, b], neverExpire: true });
    expect(ok.json).toEqual({ updated: 2, batchId: expect.any(String) });
    const batches =
      await stack.sql`SELECT DISTINCT batch_id FROM sample_expiration_audit WHERE sample_id IN (${a}, ${b})`;
    expect(batches.map((row) => row.batch_id)).toEqual([ok.json.batchId]);

    const foreignToMember = await sampleOf(owner.userId);
    const refused = await member.call('PATCH', '/samples/expiration', {
      sampleIds: [a, foreignToMember],
      useOrgDefault: true,
    });
    expect(refused.status).toBe(403);
    expect((await call('GET', `/samples/${a}`)).json.expiresAtSource).toBe('custom');

    const other = await createTenant(stack.sql);
    const foreign = await insertSample(stack.sql, { organizationId: other.organizationId });
    expect(
      (await call('PATCH', '/samples/expiration', { sampleIds: [a, foreign], neverExpire: true })).status,
    ).toBe(404);
  });

  test('an organization admin and a platform administrator pass the gate on samples they did not create', async () => {
    for (const [who, caller] of [
      ['admin', admin],
      ['platform admin', platformAdmin],
    ] as const) {
      const id = await sampleOf(owner.userId);
      const statuses = [
        (await caller.call('PATCH', `/samples/${id}/expiration`, { neverExpire: true })).status,
        (await caller.call('DELETE', `/samples/${id}`)).status,
        (await caller.call('POST', `/samples/${id}/restore`)).status,
      ];
      expect(`${who} ${statuses.join(' ')}`).toBe(`${who} 200 200 200`);
      const bulk = await caller.call('PATCH', '/samples/expiration', {
        sampleIds: [await sampleOf(owner.userId), await sampleOf(member.userId)],
        neverExpire: true,
      });
      expect(`${who} ${bulk.status} ${bulk.json.updated}`).toBe(`${who} 200 2`);
    }
  });

  test('a member who did not create the sample is 403 forbidden on expiration, delete and restore; nothing changes', async () => {
    const expiresAt = new Date(Date.now() + 5 * DAY).toISOString();
    const active = await sampleOf(owner.userId, { expiresAt: new Date(expiresAt) });
    const trashed = await sampleOf(admin.userId);
    expect((await call('DELETE', `/samples/${trashed}`)).status).toBe(200);
    for (const [method, path, body] of [
      ['PATCH', `/samples/${active}/expiration`, { neverExpire: true }],
      ['DELETE', `/samples/${active}`, undefined],
      ['POST', `/samples/${trashed}/restore`, undefined],
    ] as const) {
      const refused = await member.call(method, path, body);
      expect(`${method} ${path} ${refused.status}`).toBe(`${method} ${path} 403`);
      expect(refused.json).toEqual({
        error: 'forbidden',
        message: expect.any(String),
        required: null,
        retryAfterSeconds: null,
      });
    }
    expect(await detailOf(active)).toMatchObject({ expiresAt, expiresAtSource: 'custom', trashedAt: null });
    expect((await detailOf(trashed)).trashedAt).not.toBeNull();
    expect(await stack.sql`SELECT 1 FROM sample_expiration_audit WHERE sample_id = ${active}`).toHaveLength(
      0,
    );
  });

  test('bulk with a mix of creators: all or nothing for a member, all for an admin', async () => {
    const own = await sampleOf(member.userId);
    const others = await sampleOf(admin.userId);
    const refused = await member.call('PATCH', '/samples/expiration', {
      sampleIds: [own, others],
      neverExpire: true,
    });
    expect(refused.status).toBe(403);
    expect(refused.json.error).toBe('forbidden');
    expect(refused.json.message).toContain(others);
    expect(refused.json.message).not.toContain(own);
    expect(
      await stack.sql`SELECT 1 FROM sample_expiration_audit WHERE sample_id IN (${own}, ${others})`,
    ).toHaveLength(0);
    expect((await detailOf(own)).expiresAtSource).toBeNull();
    const allowed = await admin.call('PATCH', '/samples/expiration', {
      sampleIds: [own, others],
      neverExpire: true,
    });
    expect(allowed.json.updated).toBe(2);
    expect((await detailOf(own)).expiresAtSource).toBe('custom');
  });

  test('bulk takes at most 500 ids', async () => {
    const ids = Array.from({ length: 501 }, () => crypto.randomUUID());
    expect((await call('PATCH', '/samples/expiration', { sampleIds: ids, neverExpire: true })).status).toBe(
      422,
    );
  });
});

describe('Trash and restore', () => {
  test('DELETE moves to Trash now; the sample leaves the list and enters the Trash', async () => {
    const id = await sampleOf(owner.userId);
    const deleted = await call('DELETE', `/samples/${id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.json.trashedAt).not.toBeNull();
    expect(
      (await call('GET', '/samples?limit=100')).json.items.map((i: { id: string }) => i.id),
    ).not.toContain(id);
    expect(
      (await call('GET', '/samples/trash?limit=100')).json.items.map((i: { id: string }) => i.id),
    ).toContain(id);
    expect((await call('PATCH', `/samples/${id}`, { name: 'x' })).status).toBe(409);
    const restored = await call('POST', `/samples/${id}/restore`);
    expect(restored.json).toEqual({ id, trashedAt: null, expiresAt: null });
  });

  test('restore extends a passed expiration to now + the organization default', async () => {
    const tenant = await createTenant(stack.sql, { expirationDays: 12 });
    const id = await insertSample(stack.sql, {
      organizationId: tenant.organizationId,
      createdBy: tenant.userId,
      expiresAt: new Date(Date.now() - DAY),
    });
    await stack.sql`UPDATE samples SET trashed_at = now() - interval '1 day' WHERE id = ${id}`;
    const restored = (await apiClient(stack.api, tenant.apiKey)('POST', `/samples/${id}/restore`)).json;
    expect(restored.trashedAt).toBeNull();
    expect(Math.round((new Date(restored.expiresAt).getTime() - Date.now()) / DAY)).toBe(12);
  });

  test('restore without an organization default extends a passed expiration to now + 30 days; a future one stays', async () => {
    const tenant = await createTenant(stack.sql);
    const client = apiClient(stack.api, tenant.apiKey);
    const passed = await insertSample(stack.sql, {
      organizationId: tenant.organizationId,
      createdBy: tenant.userId,
      expiresAt: new Date(Date.now() - DAY),
    });
    const future = new Date(Date.now() + 3 * DAY);
    const pending = await insertSample(stack.sql, {
      organizationId: tenant.organizationId,
      createdBy: tenant.userId,
      expiresAt: future,
    });
    await stack.sql`UPDATE samples SET trashed_at = now() - interval '1 day' WHERE id IN (${passed}, ${pending})`;
    const restored = await client('POST', `/samples/${passed}/restore`);
    expect(restored.status).toBe(200);
    expect(Math.round((new Date(restored.json.expiresAt).getTime() - Date.now()) / DAY)).toBe(30);
    expect((await client('GET', `/samples/${passed}`)).json).toMatchObject({
      trashedAt: null,
      expiresAt: restored.json.expiresAt,
      expiresInDays: 29,
    });
    expect((await client('POST', `/samples/${pending}/restore`)).json).toEqual({
      id: pending,
      trashedAt: null,
      expiresAt: future.toISOString(),
    });
  });

  test('the sweep schedule workflow trashes expired samples, idempotently, with an injected clock', async () => {
    const asOf = new Date(Date.now() + 400 * DAY);
    const id = await sampleOf(owner.userId, { expiresAt: new Date(Date.now() + 365 * DAY) });
    const first = await runWorkflow('retentionSweepWorkflow', asOf);
    expect(first.trashed).toBeGreaterThanOrEqual(1);
    const [row] = await stack.sql`SELECT trashed_at FROM samples WHERE id = ${id}`;
    expect(row!.trashed_at.toISOString()).toBe(asOf.toISOString());
    expect((await runWorkflow('retentionSweepWorkflow', asOf)).trashed).toBe(0);
  });

  test('the sweep also drops expired OAuth protocol rows and keeps live ones', async () => {
    await stack.sql`INSERT INTO oauth_payloads (model, id, payload, expires_at) VALUES
      ('AuthorizationCode', 'expired-code', '{}', now() - interval '1 minute'),
      ('AuthorizationCode', 'live-code', '{}', now() + interval '1 hour')`;
    await runWorkflow('retentionSweepWorkflow', new Date());
    const rows = await stack.sql<{ id: string }[]>`
      SELECT id FROM oauth_payloads WHERE id IN ('expired-code', 'live-code')`;
    expect(rows.map((r) => r.id)).toEqual(['live-code']);
  });

  test('the purge workflow deletes stored objects and the row 7 days after trashedAt; restore is then 409 or 404', async () => {
    const id = await sampleOf(owner.userId);
    const prefix = `orgs/${owner.organizationId}/samples/${id}/`;
    await stack.store.put(`${prefix}original/slide.svs`, new Uint8Array([1, 2, 3]));
    await stack.store.put(`${prefix}he/zarr.json`, new Uint8Array([4]));
    const trashedAt = new Date(Date.now() + 500 * DAY);
    await stack.sql`UPDATE samples SET trashed_at = ${trashedAt} WHERE id = ${id}`;
    await runWorkflow('trashPurgeWorkflow', new Date(trashedAt.getTime() + 6 * DAY));
    expect(await stack.sql`SELECT id FROM samples WHERE id = ${id}`).toHaveLength(1);
    expect(await stack.store.get(`${prefix}he/zarr.json`)).toBeDefined();

    const asOf = new Date(trashedAt.getTime() + 7 * DAY + 1000);
    const purged = await runWorkflow('trashPurgeWorkflow', asOf);
    expect(purged.purged).toBeGreaterThanOrEqual(1);
    expect(await stack.sql`SELECT id FROM samples WHERE id = ${id}`).toHaveLength(0);
    const left: string[] = [];
    for await (const key of stack.store.list(prefix)) left.push(key);
    expect(left).toEqual([]);
    expect((await call('POST', `/samples/${id}/restore`)).status).toBe(404);
    // A second run for the same instant finds nothing left to do.
    expect(await runWorkflow('trashPurgeWorkflow', asOf)).toEqual({ purged: 0 });
  });

  test('a sample restored while the purge waits for its row is not purged', async () => {
    const id = await sampleOf(owner.userId);
    const object = `orgs/${owner.organizationId}/samples/${id}/original/slide.svs`;
    await stack.store.put(object, new Uint8Array([1, 2, 3]));
    const trashedAt = new Date(Date.now() + 600 * DAY);
    await stack.sql`UPDATE samples SET trashed_at = ${trashedAt} WHERE id = ${id}`;
    // The restore has updated the row but not committed when the purge tries to claim it.
    const restore = await holdTransaction((tx) => restoreSample(tx, owner.organizationId, id, new Date()));
    const purge = runWorkflow('trashPurgeWorkflow', new Date(trashedAt.getTime() + 8 * DAY));
    await untilSomeoneWaitsForALock();
    await restore.commit();
    await purge;
    const [row] = await stack.sql`SELECT trashed_at, purge_started_at FROM samples WHERE id = ${id}`;
    expect(row).toEqual({ trashed_at: null, purge_started_at: null });
    expect(await stack.store.get(object)).toEqual(new Uint8Array([1, 2, 3]));
  });

  test('a restore that waits for an uncommitted purge claim answers 409 and restores nothing', async () => {
    const id = await sampleOf(owner.userId);
    await stack.sql`UPDATE samples SET trashed_at = now() - interval '8 days' WHERE id = ${id}`;
    // The purge's claim, as claimSamplesToPurge writes it, for this one row and not yet committed.
    const claim = await holdTransaction(
      (tx) => tx`UPDATE samples SET purge_started_at = now() WHERE id = ${id}`,
    );
    const restoring = call('POST', `/samples/${id}/restore`);
    await untilSomeoneWaitsForALock();
    await claim.commit();
    const response = await restoring;
    expect(response.status).toBe(409);
    expect(response.json.error).toBe('deletion_in_progress');
    const [row] = await stack.sql`SELECT trashed_at FROM samples WHERE id = ${id}`;
    expect(row!.trashed_at).not.toBeNull();
  });

  test('restore once permanent deletion has started is 409 deletion_in_progress', async () => {
    const id = await sampleOf(owner.userId);
    await stack.sql`UPDATE samples SET trashed_at = now() - interval '8 days', purge_started_at = now() WHERE id = ${id}`;
    const response = await call('POST', `/samples/${id}/restore`);
    expect(response.status).toBe(409);
    expect(response.json.error).toBe('deletion_in_progress');
  });

  test('the worker creates the retention and reconciler Schedules, once', async () => {
    await ensureSchedules(stack.client, stack.taskQueuePrefix);
    await ensureSchedules(stack.client, stack.taskQueuePrefix);
    const sweep = await stack.client.schedule
      .getHandle(`${stack.taskQueuePrefix}-retention-sweep`)
      .describe();
    const purge = await stack.client.schedule.getHandle(`${stack.taskQueuePrefix}-trash-purge`).describe();
    expect(sweep.action).toMatchObject({ type: 'startWorkflow', workflowType: 'retentionSweepWorkflow' });
    expect(purge.action).toMatchObject({ type: 'startWorkflow', workflowType: 'trashPurgeWorkflow' });
    const reconciler = await stack.client.schedule
      .getHandle(`${stack.taskQueuePrefix}-maintenance`)
      .describe();
    expect(reconciler.action).toMatchObject({ type: 'startWorkflow', workflowType: 'maintenanceWorkflow' });
  });
});
