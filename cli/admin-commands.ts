import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { generateApiKey } from '../api/credentials';
import { hashPassword } from '../api/oauth/passwords';
import type { Sql } from '../db';
import { insertApiKey, listApiKeys, revokeApiKey } from '../db/api-keys';
import { grantCredits } from '../db/credits';
import { insertOAuthClient, revokeOAuthClient, setUserPasswordHash, upsertOAuthClient } from '../db/oauth';
import { findOrganization, insertOrganization, listOrganizations } from '../db/organizations';
import { PublishRefused, publishSample, unpublishSample } from '../db/public-samples';
import { insertFieldDefinition, retireFieldDefinition } from '../db/sample-fields';
import { listMembers, upsertMembership, upsertUser } from '../db/users';
import { Role } from '../schemas/enums';
import { WEB_APP_CALLBACK_PATH, WEB_APP_CLIENT_ID } from '../schemas/oauth';
import { rerunSteps } from '../schemas/temporal';
import { type RerunDeps, rerunStep } from './rerun';

export const ADMIN_USAGE = `Usage: npm run admin -- <command> [options]
  org create     --name NAME [--credits N] [--expiration-days N] [--auto-segment true|false]
  org list                                                     (each with its credits and members)
  user create    --email EMAIL --org ORG_ID --role owner|admin|member [--platform-admin]
  user list      --org ORG_ID
  key create     --org ORG_ID --user USER_ID [--name NAME]     (prints the key once)
  key list       --org ORG_ID                                  (ids, names, prefixes, last use)
  key revoke     --id KEY_ID
  credits grant  --org ORG_ID --amount N [--note TEXT]
  field create   --org ORG_ID --key KEY --label LABEL --type text|number|date|boolean|select|multi_select [--options a,b,c]
  field retire   --org ORG_ID --key KEY
  job rerun      --job JOB_ID --step predict|postprocess       (needs TEMPORAL_ADDRESS; waits for it)
  sample rerun   --sample SAMPLE_ID --step probe|pyramid|tissue (needs TEMPORAL_ADDRESS; waits for it)
  sample publish --sample SAMPLE_ID [--job JOB_ID] [--markers a,b] [--name NAME]   (into the public cohort)
  sample unpublish --sample SAMPLE_ID
  user password  --email EMAIL [--password PASSWORD]      (sign-in on the OAuth pages; generated and printed once if omitted)
  oauth-client create --name NAME --redirect-uri URI [--redirect-uri URI ...] [--confidential]
  oauth-client revoke --id CLIENT_ID
  oauth-client web-app --app-url APP_URL    (registers the web app's public client; npm start does it)`;

const options = {
  name: { type: 'string' },
  credits: { type: 'string' },
  'expiration-days': { type: 'string' },
  'auto-segment': { type: 'string' },
  email: { type: 'string' },
  org: { type: 'string' },
  role: { type: 'string' },
  'platform-admin': { type: 'boolean' },
  user: { type: 'string' },
  id: { type: 'string' },
  amount: { type: 'string' },
  note: { type: 'string' },
  key: { type: 'string' },
  label: { type: 'string' },
  type: { type: 'string' },
  options: { type: 'string' },
  job: { type: 'string' },
  sample: { type: 'string' },
  step: { type: 'string' },
  markers: { type: 'string' },
  password: { type: 'string' },
  'redirect-uri': { type: 'string', multiple: true },
  confidential: { type: 'boolean' },
  'app-url': { type: 'string' },
} as const;

const count = z.coerce.number().int().positive();
// RFC 8252: loopback http for native apps, notebooks and a development web app; https otherwise.
const redirectUri = z
  .url()
  .refine(
    (uri) => /^(https:|http:\/\/(127\.0\.0\.1|localhost|\[::1\])[:/])/.test(uri),
    'https, or http on loopback',
  );
const schemas = {
  'org create': z.object({
    name: z.string().min(1).max(200),
    credits: count.optional(),
    'expiration-days': count.optional(),
    'auto-segment': z.enum(['true', 'false']).optional(),
  }),
  'user create': z.object({
    email: z.email(),
    org: z.uuid(),
    role: Role,
    'platform-admin': z.boolean().optional(),
  }),
  'org list': z.object({}),
  'user list': z.object({ org: z.uuid() }),
  'key list': z.object({ org: z.uuid() }),
  'key create': z.object({ org: z.uuid(), user: z.uuid(), name: z.string().min(1).optional() }),
  'key revoke': z.object({ id: z.uuid() }),
  'credits grant': z.object({ org: z.uuid(), amount: count, note: z.string().optional() }),
  'field create': z
    .object({
      org: z.uuid(),
      key: z
        .string()
        .regex(/^[a-z][a-z0-9_]{0,62}$/, 'lowercase letters, digits and _, starting with a letter'),
      label: z.string().min(1).max(200),
      type: z.enum(['text', 'number', 'date', 'boolean', 'select', 'multi_select']),
      options: z.string().optional(),
    })
    .refine((v) => !['tags', 'public'].includes(v.key), {
      message: 'tags and public are system fields',
      path: ['key'],
    })
    .refine((v) => (v.type === 'select' || v.type === 'multi_select') === Boolean(v.options), {
      message: 'select and multi_select need --options; other types take none',
      path: ['options'],
    }),
  'field retire': z.object({ org: z.uuid(), key: z.string().min(1) }),
  'job rerun': z.object({ job: z.uuid(), step: z.enum(rerunSteps.job) }),
  'sample rerun': z.object({ sample: z.uuid(), step: z.enum(rerunSteps.sample) }),
  'sample publish': z.object({
    sample: z.uuid(),
    job: z.uuid().optional(),
    markers: z.string().min(1).optional(),
    name: z.string().min(1).max(200).optional(),
  }),
  'sample unpublish': z.object({ sample: z.uuid() }),
  'user password': z.object({ email: z.email(), password: z.string().min(12).max(1000).optional() }),
  'oauth-client create': z.object({
    name: z.string().min(1).max(200),
    'redirect-uri': z.array(redirectUri).min(1),
    confidential: z.boolean().optional(),
  }),
  'oauth-client revoke': z.object({ id: z.string().min(1) }),
  'oauth-client web-app': z.object({ 'app-url': redirectUri }),
};
type Command = keyof typeof schemas;

export class UsageError extends Error {}

/** The name the consent page shows for the web application's client. */
const WEB_APP_NAME = 'Slide Prediction Service web app';

/** node's own refusals of an argument (an unknown option, `--amount -5`), as usage errors. */
function parseArguments(argv: string[]) {
  try {
    return parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (err) {
    if ((err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS'))
      throw new UsageError(`${(err as Error).message}\n${ADMIN_USAGE}`);
    throw err;
  }
}

function parseCommand(argv: string[]): { command: Command; values: Record<string, unknown> } {
  const { positionals, values } = parseArguments(argv);
  const command = positionals.slice(0, 2).join(' ');
  if (!(command in schemas)) throw new UsageError(`unknown command '${command}'\n${ADMIN_USAGE}`);
  const parsed = schemas[command as Command].safeParse(values);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((issue) => `  --${issue.path.join('.')}: ${issue.message}`)
      .join('\n');
    throw new UsageError(`${command}:\n${problems}`);
  }
  return { command: command as Command, values: parsed.data };
}

/**
 * Runs one admin command against the database and returns what it prints (as JSON). `temporal`
 * connects to the workflow engine, for the commands that need one (re-runs) only.
 */
export async function runAdminCommand(
  sql: Sql,
  argv: string[],
  temporal?: () => Promise<Omit<RerunDeps, 'sql'>>,
): Promise<Record<string, unknown>> {
  const { command, values: v } = parseCommand(argv);
  if (typeof v.org === 'string' && !(await findOrganization(sql, v.org)))
    throw new UsageError(`${command}: no organization ${v.org} (npm run admin -- org list)`);
  switch (command) {
    case 'org create': {
      const input = v as z.infer<(typeof schemas)['org create']>;
      const organization = await sql.begin(async (tx) => {
        const created = await insertOrganization(tx, {
          name: input.name,
          defaultExpirationDays: input['expiration-days'] ?? null,
          autoSegmentDefault: input['auto-segment'] === undefined ? null : input['auto-segment'] === 'true',
        });
        if (input.credits)
          await grantCredits(tx, {
            organizationId: created.id,
            amount: input.credits,
            note: 'initial grant',
          });
        return created;
      });
      return { organizationId: organization.id, name: organization.name };
    }
    case 'org list':
      return { organizations: await listOrganizations(sql) };
    case 'user list':
      return { users: await listMembers(sql, String(v.org)) };
    case 'key list':
      return { keys: await listApiKeys(sql, String(v.org)) };
    case 'user create': {
      const input = v as z.infer<(typeof schemas)['user create']>;
      const user = await upsertUser(sql, {
        email: input.email,
        platformAdmin: input['platform-admin'] ?? false,
      });
      const before = await upsertMembership(sql, {
        organizationId: input.org,
        userId: user.id,
        role: input.role,
      });
      // Run again for a member, it changes their role: said, so that no owner is demoted unseen.
      return {
        userId: user.id,
        email: user.email,
        organizationId: input.org,
        role: input.role,
        ...(before !== undefined && before !== input.role ? { previousRole: before } : {}),
      };
    }
    case 'key create': {
      const input = v as z.infer<(typeof schemas)['key create']>;
      const key = generateApiKey();
      const record = await insertApiKey(sql, {
        organizationId: input.org,
        userId: input.user,
        name: input.name ?? 'api key',
        prefix: key.prefix,
        secretSha256: key.secretSha256,
      });
      if (!record)
        throw new UsageError(
          `key create: user ${input.user} is not a member of organization ${input.org} (npm run admin -- user list --org ${input.org})`,
        );
      return { keyId: record.id, apiKey: key.secret, note: 'shown once: only its hash is stored' };
    }
    case 'key revoke': {
      const input = v as z.infer<(typeof schemas)['key revoke']>;
      return { keyId: input.id, revoked: await revokeApiKey(sql, input.id) };
    }
    case 'field create': {
      const input = v as z.infer<(typeof schemas)['field create']>;
      const options = input.options
        ? [
            ...new Set(
              input.options
                .split(',')
                .map((option) => option.trim())
                .filter(Boolean),
            ),
          ]
        : [];
      const definition = await insertFieldDefinition(sql, {
        organizationId: input.org,
        key: input.key,
        label: input.label,
        valueType: input.type,
        options,
      });
      if (!definition)
        throw new UsageError(
          `field create: the organization already has a field '${input.key}' (field retire frees its key)`,
        );
      return {
        fieldId: definition.id,
        key: definition.key,
        valueType: definition.valueType,
        options: definition.options,
      };
    }
    case 'field retire': {
      const input = v as z.infer<(typeof schemas)['field retire']>;
      return { key: input.key, retired: await retireFieldDefinition(sql, input.org, input.key) };
    }
    case 'credits grant': {
      const input = v as z.infer<(typeof schemas)['credits grant']>;
      await grantCredits(sql, { organizationId: input.org, amount: input.amount, note: input.note });
      return { organizationId: input.org, granted: input.amount };
    }
    case 'job rerun': {
      const input = v as z.infer<(typeof schemas)['job rerun']>;
      const rerun = await rerunStep(
        { sql, ...(await connect(temporal, command)) },
        {
          kind: 'job',
          id: input.job,
          step: input.step,
        },
      );
      // The statistics hold a histogram per marker: too long to print; the re-run's result in Temporal has them.
      if (rerun.step === 'predict' && 'tiles' in rerun.result) {
        const { tiles, failedTiles } = rerun.result;
        return { workflowId: rerun.workflowId, step: rerun.step, result: { tiles, failedTiles } };
      }
      return { ...rerun };
    }
    case 'sample publish': {
      const input = v as z.infer<(typeof schemas)['sample publish']>;
      try {
        return {
          ...(await publishSample(sql, {
            sampleId: input.sample,
            jobId: input.job,
            markers: input.markers
              ?.split(',')
              .map((marker) => marker.trim())
              .filter(Boolean),
            displayName: input.name,
          })),
        };
      } catch (err) {
        if (err instanceof PublishRefused) throw new UsageError(`sample publish: ${err.message}`);
        throw err;
      }
    }
    case 'sample unpublish': {
      const input = v as z.infer<(typeof schemas)['sample unpublish']>;
      return { sampleId: input.sample, unpublished: await unpublishSample(sql, input.sample) };
    }
    case 'user password': {
      const input = v as z.infer<(typeof schemas)['user password']>;
      const password = input.password ?? randomBytes(18).toString('base64url');
      const userId = await setUserPasswordHash(sql, input.email, await hashPassword(password));
      if (!userId) throw new UsageError(`user password: no user with email ${input.email}`);
      return input.password
        ? { userId }
        : { userId, password, note: 'shown once: only its scrypt hash is stored' };
    }
    case 'oauth-client create': {
      const input = v as z.infer<(typeof schemas)['oauth-client create']>;
      const clientId = `sps-${randomBytes(12).toString('base64url')}`;
      const clientSecret = input.confidential ? randomBytes(32).toString('base64url') : undefined;
      await insertOAuthClient(sql, {
        clientId,
        name: input.name,
        metadata: {
          client_name: input.name,
          redirect_uris: input['redirect-uri'],
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method: clientSecret ? 'client_secret_basic' : 'none',
          ...(clientSecret ? { client_secret: clientSecret } : {}),
        },
      });
      return clientSecret
        ? { clientId, clientSecret, note: 'keep the secret: the token endpoint needs it' }
        : { clientId, note: 'a public client: PKCE alone protects its codes' };
    }
    case 'oauth-client web-app': {
      const input = v as z.infer<(typeof schemas)['oauth-client web-app']>;
      const redirect = `${input['app-url'].replace(/\/+$/, '')}${WEB_APP_CALLBACK_PATH}`;
      await upsertOAuthClient(sql, {
        clientId: WEB_APP_CLIENT_ID,
        name: WEB_APP_NAME,
        metadata: {
          client_name: WEB_APP_NAME,
          redirect_uris: [redirect],
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method: 'none',
        },
      });
      return { clientId: WEB_APP_CLIENT_ID, redirectUri: redirect };
    }
    case 'oauth-client revoke': {
      const input = v as z.infer<(typeof schemas)['oauth-client revoke']>;
      return { clientId: input.id, revoked: await revokeOAuthClient(sql, input.id) };
    }
    case 'sample rerun': {
      const input = v as z.infer<(typeof schemas)['sample rerun']>;
      const rerun = await rerunStep(
        { sql, ...(await connect(temporal, command)) },
        { kind: 'sample', id: input.sample, step: input.step },
      );
      return { ...rerun };
    }
  }
}

async function connect(temporal: (() => Promise<Omit<RerunDeps, 'sql'>>) | undefined, command: string) {
  if (!temporal) throw new UsageError(`${command} needs the workflow engine (TEMPORAL_ADDRESS)`);
  return temporal();
}

/** An organization with one owner and an API key, through the commands above (dev, tests, benchmarks). */
export async function createOrganizationWithOwner(
  sql: Sql,
  input: { name: string; email: string; credits?: number; expirationDays?: number },
): Promise<{ organizationId: string; userId: string; apiKey: string; keyId: string }> {
  const orgArgs = ['org', 'create', '--name', input.name];
  if (input.credits) orgArgs.push('--credits', String(input.credits));
  if (input.expirationDays) orgArgs.push('--expiration-days', String(input.expirationDays));
  const organizationId = String((await runAdminCommand(sql, orgArgs)).organizationId);
  const userId = String(
    (
      await runAdminCommand(sql, [
        'user',
        'create',
        '--email',
        input.email,
        '--org',
        organizationId,
        '--role',
        'owner',
      ])
    ).userId,
  );
  const key = await runAdminCommand(sql, [
    'key',
    'create',
    '--org',
    organizationId,
    '--user',
    userId,
    '--name',
    'owner',
  ]);
  return { organizationId, userId, apiKey: String(key.apiKey), keyId: String(key.keyId) };
}
