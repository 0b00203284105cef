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
  expect(user).toEqual({ userId: user.userId, organizationId, email: 'ada@lab.org', role: 'admin' });
  const again = ['user', 'create', '--email', 'ada@lab.org', '--org', organizationId, '--role'];
  await expect(runAdminCommand(db.sql, [...again, 'admin'])).resolves.toEqual(user);
  await expect(runAdminCommand(db.sql, [...again, 'member'])).resolves.toMatchObject({
    role: 'member',
    previousRole: 'admin',
  });
  await runAdminCommand(db.sql, [...again, 'admin']);

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
  ).rejects.toThrow(
    new UsageError(
      `key create: user ${user.userId} is not a member of organization ${a.organizationId} (npm run admin -- user list --org ${a.organizationId})`,
    ),
  );
});

test('an unknown organization, a field key in use and node refusing an argument are usage errors, not stack traces', async () => {
  const nowhere = '00000000-0000-4000-8000-000000000000';
  for (const args of [
    ['user', 'create', '--email', 'x@y.org', '--org', nowhere, '--role', 'owner'],
    ['credits', 'grant', '--org', nowhere, '--amount', '5'],
    ['field', 'create', '--org', nowhere, '--key', 'site', '--label', 'Site', '--type', 'text'],
    ['key', 'list', '--org', nowhere],
  ])
    await expect(runAdminCommand(db.sql, args)).rejects.toThrow(
      new UsageError(`${args[0]} ${args[1]}: no organization ${nowhere} (npm run admin -- org list)`),
    );

  const org = String((await runAdminCommand(db.sql, ['org', 'create', '--name', 'Fields'])).organizationId);
  const site = ['field', 'create', '--org', org, '--key', 'site', '--label', 'Site', '--type', 'text'];
  await runAdminCommand(db.sql, site);
  await expect(runAdminCommand(db.sql, site)).rejects.toThrow(
    new UsageError("field create: the organization already has a field 'site' (field retire frees its key)"),
  );
  await runAdminCommand(db.sql, ['field', 'retire', '--org', org, '--key', 'site']);
  await expect(runAdminCommand(db.sql, site)).resolves.toMatchObject({ key: 'site' });

  await expect(runAdminCommand(db.sql, ['credits', 'grant', '--org', org, '--amount', '-5'])).rejects.toThrow(
    UsageError,
  );
  await expect(runAdminCommand(db.sql, ['org', 'list', '--colour'])).rejects.toThrow(
    /Unknown option '--colour'/,
  );
  await expect(runAdminCommand(db.sql, ['org', 'create', '--name', 'x'.repeat(201)])).rejects.toThrow(
    /--name/,
  );
});

test('org list, user list and key list find the ids that revoke and grant need', async () => {
  const org = await runAdminCommand(db.sql, ['org', 'create', '--name', 'Listed', '--credits', '25']);
  const organizationId = String(org.organizationId);
  const member = (email: string, role: string) =>
    runAdminCommand(db.sql, ['user', 'create', '--email', email, '--org', organizationId, '--role', role]);
  const bea = await member('bea@listed.org', 'member');
  const al = await member('al@listed.org', 'owner');
  await runAdminCommand(db.sql, ['user', 'password', '--email', 'al@listed.org']);
  const inListed = ['--org', organizationId];
  const keyOf = (user: Record<string, unknown>, name: string) =>
    runAdminCommand(db.sql, ['key', 'create', ...inListed, '--user', String(user.userId), '--name', name]);
  const laptop = await keyOf(al, 'laptop');
  const pipeline = await keyOf(bea, 'pipeline');
  await runAdminCommand(db.sql, ['key', 'revoke', '--id', String(laptop.keyId)]);

  const { organizations } = await runAdminCommand(db.sql, ['org', 'list']);
  expect(organizations).toContainEqual(
    expect.objectContaining({ id: organizationId, name: 'Listed', balance: 25, pending: 0, members: 2 }),
  );
  expect((await runAdminCommand(db.sql, ['user', 'list', '--org', organizationId])).users).toEqual([
    { id: al.userId, email: 'al@listed.org', role: 'owner', platformAdmin: false, passwordSet: true },
    { id: bea.userId, email: 'bea@listed.org', role: 'member', platformAdmin: false, passwordSet: false },
  ]);
  const { keys } = (await runAdminCommand(db.sql, ['key', 'list', '--org', organizationId])) as {
    keys: { id: string; name: string; email: string; prefix: string; revokedAt: Date | null }[];
  };
  expect(
    keys.map(({ id, name, email, prefix, revokedAt }) => ({
      id,
      name,
      email,
      prefix,
      revoked: revokedAt !== null,
    })),
  ).toEqual([
    {
      id: pipeline.keyId,
      name: 'pipeline',
      email: 'bea@listed.org',
      prefix: String(pipeline.apiKey).slice(0, 12),
      revoked: false,
    },
    {
      id: laptop.keyId,
      name: 'laptop',
      email: 'al@listed.org',
      prefix: String(laptop.apiKey).slice(0, 12),
      revoked: true,
    },
  ]);
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
