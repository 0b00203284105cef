import postgres from 'postgres';

export type Sql = postgres.Sql;
export type TransactionSql = postgres.TransactionSql;

/** One pool per process. Timestamps come back as Date, bigints as strings. */
export function createSql(url: string, options: { max?: number } = {}): Sql {
  return postgres(url, {
    max: options.max ?? 10,
    onnotice: () => {},
    // Facet queries vary wildly in selectivity with their parameters (a LIKE pattern, a field
    // value): a cached generic plan measured 2-3x slower than planning each call.
    connection: { application_name: 'slide-prediction-service', plan_cache_mode: 'force_custom_plan' },
  });
}

/** SQLSTATE classes that mean "the database is not there", translated once here. */
export function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code;
  return (
    typeof code === 'string' &&
    (code === 'ECONNREFUSED' ||
      code === 'ENOTFOUND' ||
      code === 'ETIMEDOUT' ||
      code === 'CONNECTION_CLOSED' ||
      code === 'CONNECT_TIMEOUT' ||
      code.startsWith('08') ||
      code === '57P01' ||
      code === '57P03')
  );
}

/**
 * Text the database cannot store: NUL in a text value (22021, "invalid byte sequence") or a
 * `\u0000` escape in jsonb (22P05). PostgreSQL refuses it; it is a value the client sent.
 */
export function isUnstorableText(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code;
  return code === '22021' || code === '22P05';
}

/** Anything that runs queries: the pool or an open transaction. */
export type Queryable = Sql | postgres.TransactionSql;
