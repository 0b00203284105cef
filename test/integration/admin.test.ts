import { runAdminCommand, UsageError } from '../../cli/admin-commands';
import { creditSummary } from '../../db/credits';
import { createTestDatabase, type TestDatabase } from '../support/database';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

test('organization, user, key, credits: the admin commands', async () => {
  const org = await runAdminCommand(db.sql, [
    'org',
    'create',
    '--name',
    'Lab',
    '--credits',
    '40',
    '--expiration-days',
    '30',
    '--auto-segment',
    'false',
  ]);
  const organizationId = String(org.organizationId);
  const [row] =
    await db.sql`SELECT default_expiration_days, auto_segment_default FROM organizations WHERE id = ${organizationId}`;
  expect(row).toEqual({ default_expiration_days: 30, auto_segment_default: false });

  const user = await runAdminCommand(db.sql, [
    'user',
    'create',
    '--email',
    'Ada@Lab.org',
    '--org',
    organizationId,
    '--role',
    'admin',
  ]);
  expect(user).toMatchObject({ email: 'ada@lab.org', role: 'admin' });

  const key = await runAdminCommand(db.sql, [
    'key',
    'create',
    '--org',
    organizationId,
    '--user',
    String(user.userId),
    '--name',
    'ci',
  ]);
  expect(String(key.apiKey)).toMatch(/^sps_[A-Za-z0-9_-]{43}$/);
  const stored =
    await db.sql`SELECT count(*)::int AS n FROM api_keys WHERE prefix = ${String(key.apiKey).slice(0, 12)}`;
  expect(stored[0]!.n).toBe(1);

  await runAdminCommand(db.sql, [
    'credits',
    'grant',
    '--org',
    organizationId,
    '--amount',
    '60',
    '--note',
    'top-up',
  ]);
  expect(await creditSummary(db.sql, organizationId)).toEqual({ balance: 100, pending: 0 });

  expect(await runAdminCommand(db.sql, ['key', 'revoke', '--id', String(key.keyId)])).toMatchObject({
    revoked: true,
  });
  expect(await runAdminCommand(db.sql, ['key', 'revoke', '--id', String(key.keyId)])).toMatchObject({
    revoked: false,
  });
});

test('a key for a user outside the organization is refused', async () => {
  const a = await runAdminCommand(db.sql, ['org', 'create', '--name', 'A']);
  const b = await runAdminCommand(db.sql, ['org', 'create', '--name', 'B']);
  const user = await runAdminCommand(db.sql, [
    'user',
    'create',
    '--email',
    'x@b.org',
    '--org',
    String(b.organizationId),
    '--role',
    'member',
  ]);
  await expect(
    runAdminCommand(db.sql, [
      'key',
      'create',
      '--org',
      String(a.organizationId),
      '--user',
      String(user.userId),
    ]),
  ).rejects.toThrow(/not a member/);
});

test('bad arguments are usage errors that say what is wrong', async () => {
  await expect(runAdminCommand(db.sql, ['org', 'delete'])).rejects.toThrow(UsageError);
  await expect(
    runAdminCommand(db.sql, ['user', 'create', '--email', 'x@y.z', '--org', 'nope', '--role', 'boss']),
  ).rejects.toThrow(/--org[\s\S]*--role/);
  await expect(
    runAdminCommand(db.sql, [
      'credits',
      'grant',
      '--org',
      String((await runAdminCommand(db.sql, ['org', 'create', '--name', 'C'])).organizationId),
      '--amount',
      '-5',
    ]),
  ).rejects.toThrow(/--amount/);
});
