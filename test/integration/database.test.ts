import { randomUUID } from 'node:crypto';
import { createSql } from '../../db';
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

describe('a migrated database', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  describe('schema', () => {
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

  describe('the connection pool', () => {
    // postgres.js pipelines up to 100 queries on a connection. Unpatched (patches/), the BEGIN of
    // sql.begin that filled a pipeline failed with UNSAFE_TRANSACTION and its connection went back
    // to the pool inside the transaction, where later queries ran and were never committed.
    test.each([197, 198, 199])(
      'a transaction begun behind %i queries on two connections commits, and leaves none inside it',
      async (ahead) => {
        const sql = createSql(db.url, { max: 2 });
        try {
          await Promise.all([sql`SELECT 1`, sql`SELECT 1`]);
          // Both connections busy, `ahead` queries pipelined behind them in turn, then the BEGIN
          // (behind 198 or 199, it is the 101st query on its connection).
          const queued = [sql`SELECT pg_sleep(0.1)`, sql`SELECT pg_sleep(0.1)`];
          for (let i = 0; i < ahead; i++) queued.push(sql`SELECT 1`);
          for (const query of queued) query.then(undefined, () => {});
          await null;
          await null;
          const committed = sql.begin(async (tx) => (await tx`SELECT txid_current()::text AS id`)[0]!.id);
          await Promise.all(queued);
          const id = await committed;
          const [transaction] = await sql`SELECT txid_status(${id}::bigint) AS status`;
          expect(transaction!.status).toBe('committed');
          const [open] = await sql`
            SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND state LIKE 'idle in transaction%'`;
          expect(open!.n).toBe(0);
        } finally {
          await sql.end({ timeout: 5 });
        }
      },
    );
  });
});
