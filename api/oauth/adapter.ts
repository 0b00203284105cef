import type { Adapter, AdapterConstructor, AdapterPayload } from 'oidc-provider';
import type { Sql } from '../../db';
import {
  consumeOAuthPayload,
  destroyOAuthPayload,
  findOAuthClient,
  findOAuthPayload,
  type OAuthPayloadRow,
  revokeOAuthGrant,
  upsertOAuthPayload,
} from '../../db/oauth';

function withConsumed(row: OAuthPayloadRow | undefined): AdapterPayload | undefined {
  if (!row) return undefined;
  const payload = row.payload as AdapterPayload;
  return row.consumedAt ? { ...payload, consumed: Math.floor(row.consumedAt.getTime() / 1000) } : payload;
}

/**
 * oidc-provider's storage contract over PostgreSQL (`oauth_payloads`, one row per model and
 * id). Clients are read from `oauth_clients`, which only the admin command writes.
 */
export function postgresAdapter(sql: Sql): AdapterConstructor {
  return class PostgresAdapter implements Adapter {
    constructor(private readonly model: string) {}

    async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
      if (this.model === 'Client') throw new Error('clients are registered with `admin oauth-client create`');
      await upsertOAuthPayload(sql, {
        model: this.model,
        id,
        payload: payload as Record<string, unknown>,
        grantId: payload.grantId,
        userCode: payload.userCode,
        uid: payload.uid,
        expiresInSeconds: expiresIn,
      });
    }

    async find(id: string): Promise<AdapterPayload | undefined> {
      if (this.model === 'Client') {
        const client = await findOAuthClient(sql, id);
        return client ? ({ ...client.metadata, client_id: client.clientId } as AdapterPayload) : undefined;
      }
      return withConsumed(await findOAuthPayload(sql, this.model, { id }));
    }

    async findByUid(uid: string): Promise<AdapterPayload | undefined> {
      return withConsumed(await findOAuthPayload(sql, this.model, { uid }));
    }

    async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
      return withConsumed(await findOAuthPayload(sql, this.model, { userCode }));
    }

    async consume(id: string): Promise<void> {
      await consumeOAuthPayload(sql, this.model, id);
    }

    async destroy(id: string): Promise<void> {
      await destroyOAuthPayload(sql, this.model, id);
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      await revokeOAuthGrant(sql, grantId);
    }
  };
}
