import { randomUUID } from 'node:crypto';
import { creditSummary, grantCredits } from '../../db/credits';
import { migrate } from '../../db/migrate';
import { takeRateToken } from '../../db/rate-limit';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { createTenant } from '../support/stack';

describe('migrations', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase({ empty: true });
  });
  afterAll(async () => {
    await db?.drop();
  });

  test('apply in order, are recorded, and a second run applies nothing', async () => {
    const first = await migrate(db.sql);
    expect(first.applied[0]).toBe('0001-create-core');
    const recorded = await db.sql`SELECT version, name FROM schema_migrations ORDER BY version`;
    expect(recorded.map((row) => row.version)).toEqual(first.applied.map((name) => Number(name.slice(0, 4))));
    expect((await migrate(db.sql)).applied).toEqual([]);
  });

  test('concurrent runs apply each migration once', async () => {
    const fresh = await createTestDatabase({ empty: true });
    try {
      const results = await Promise.all([migrate(fresh.sql), migrate(fresh.sql), migrate(fresh.sql)]);
      expect(
        results.flatMap((result) => result.applied).filter((name) => name === '0001-create-core'),
      ).toHaveLength(1);
    } finally {
      await fresh.drop();
    }
  });

  test('an applied migration whose file changed is refused', async () => {
    await db.sql`UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1`;
    await expect(migrate(db.sql)).rejects.toThrow(/changed after it was applied/);
  });
});

describe('schema', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  test('the credit ledger is append-only; balance and pending are sums over it', async () => {
    const tenant = await createTenant(db.sql, { credits: 500 });
    await grantCredits(db.sql, { organizationId: tenant.organizationId, amount: 250 });
    expect(await creditSummary(db.sql, tenant.organizationId)).toEqual({ balance: 750, pending: 0 });
    await expect(db.sql`UPDATE credit_ledger SET balance_delta = 1000000`).rejects.toThrow(/append-only/);
    await expect(db.sql`DELETE FROM credit_ledger`).rejects.toThrow(/append-only/);
    await expect(db.sql`TRUNCATE credit_ledger`).rejects.toThrow(/append-only/);
    expect(await creditSummary(db.sql, tenant.organizationId)).toEqual({ balance: 750, pending: 0 });
  });

  test('a job event NOTIFYs its listeners with the job id and sequence number', async () => {
    const tenant = await createTenant(db.sql);
    const sampleId = randomUUID();
    await db.sql`INSERT INTO samples (id, organization_id, filename, content_type, file_size, storage_key)
      VALUES (${sampleId}, ${tenant.organizationId}, 'a.svs', 'image/tiff', 10, 'k')`;
    const [job] =
      await db.sql`INSERT INTO jobs (organization_id, sample_id) VALUES (${tenant.organizationId}, ${sampleId}) RETURNING id`;
    const received: string[] = [];
    const listening = await db.sql.listen('job_events', (payload) => received.push(payload));
    await db.sql`INSERT INTO job_events (job_id, seq, status) VALUES (${job!.id}, 1, 'queued')`;
    for (let i = 0; i < 50 && received.length === 0; i++)
      await new Promise((resolve) => setTimeout(resolve, 50));
    await listening.unlisten();
    expect(received.map((payload) => JSON.parse(payload))).toEqual([{ jobId: job!.id, seq: 1 }]);
    await expect(
      db.sql`INSERT INTO job_events (job_id, seq, status) VALUES (${job!.id}, 1, 'queued')`,
    ).rejects.toThrow();
  });

  test('the rate limit bucket refills at its rate and never passes its burst', async () => {
    const key = `test:${randomUUID()}`;
    const outcomes = [];
    for (let i = 0; i < 4; i++)
      outcomes.push(await takeRateToken(db.sql, { key, ratePerSecond: 1, burst: 3 }));
    expect(outcomes.map((outcome) => outcome.allowed)).toEqual([true, true, true, false]);
    expect(outcomes[3]!.retryAfterSeconds).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect((await takeRateToken(db.sql, { key, ratePerSecond: 1, burst: 3 })).allowed).toBe(true);
  });

  test('concurrent takes from one bucket never pass more than the burst', async () => {
    const key = `test:${randomUUID()}`;
    const outcomes = await Promise.all(
      Array.from({ length: 20 }, () => takeRateToken(db.sql, { key, ratePerSecond: 0.001, burst: 5 })),
    );
    expect(outcomes.filter((outcome) => outcome.allowed)).toHaveLength(5);
  });
});
