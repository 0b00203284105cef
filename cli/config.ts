import path from 'node:path';
import { z } from 'zod';
import { SIGN_IN_THROTTLE_DEFAULTS, type SignInThrottlePolicy } from '../api/oauth/throttle';
import { SLOW_CLIENT_DEFAULTS, type SlowClientLimits } from '../api/slow-clients';
import { type TaskQueueKind, taskQueueKinds, type WorkflowSettingsMemo } from '../schemas/temporal';

const bool = z.enum(['true', 'false', '1', '0']).transform((value) => value === 'true' || value === '1');
const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().positive();
const optionalUrl = z.url().optional();

/**
 * Activity slots of a worker process per task queue: many short io steps at once; heavy steps
 * as many as the cores carry (each spreads over its own threads); one model run at a time.
 * docs/operations.md, Sizing workers, says how to change them.
 */
export const WORKER_SLOT_DEFAULTS: Readonly<Record<TaskQueueKind, number>> = {
  io: 20,
  compute: 2,
  inference: 1,
};

const queueList = z
  .string()
  .default(taskQueueKinds.join(','))
  .transform((list) => list.split(',').map((name) => name.trim()))
  .pipe(
    z
      .array(z.enum(taskQueueKinds))
      .min(1)
      .refine((names) => new Set(names).size === names.length, 'a queue is named twice'),
  );

/**
 * Every environment variable the service reads, with its default. docs/operations.md lists
 * them; no other module reads `process.env`.
 */
const EnvSchema = z.object({
  SPS_DATA_DIR: z.string().default('.data'),
  HOST: z.string().default('127.0.0.1'),
  PORT: port.default(8080),
  PUBLIC_BASE_URL: optionalUrl,
  APP_URL: optionalUrl,
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
  DATABASE_POOL_SIZE: positiveInt.default(10),
  TEMPORAL_ADDRESS: z
    .string()
    .regex(/^[^:/\s]+:\d+$/, 'must be host:port')
    .optional(),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE_PREFIX: z
    .string()
    .regex(/^[a-z0-9-]*$/, 'lowercase letters, digits and dashes')
    .default(''),
  STORAGE_BACKEND: z.enum(['fs', 's3']).default('fs'),
  STORAGE_FS_ROOT: z.string().optional(),
  S3_BUCKET: z.string().min(3).optional(),
  S3_REGION: z.string().default('us-east-1'),
  S3_ENDPOINT: optionalUrl,
  S3_ACCESS_KEY_ID: z.string().optional(),
  S3_SECRET_ACCESS_KEY: z.string().optional(),
  S3_FORCE_PATH_STYLE: bool.default(false),
  SIGNING_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  RATE_LIMIT_PER_SECOND: positiveInt.default(20),
  RATE_LIMIT_BURST: positiveInt.default(100),
  JSON_BODY_LIMIT_BYTES: positiveInt.default(1024 * 1024),
  UPLOAD_MAX_BYTES: positiveInt.default(50 * 1024 ** 3),
  UPLOAD_CHUNK_MAX_BYTES: positiveInt.default(512 * 1024 ** 2),
  UPLOAD_SESSION_TTL_SECONDS: positiveInt.default(7 * 24 * 3600),
  SIGNED_URL_TTL_SECONDS: positiveInt.default(3600),
  HTTP_HEADERS_TIMEOUT_MS: positiveInt.default(SLOW_CLIENT_DEFAULTS.headersTimeoutMs),
  HTTP_BODY_TIMEOUT_MS: positiveInt.default(SLOW_CLIENT_DEFAULTS.bodyTimeoutMs),
  HTTP_UPLOAD_IDLE_MS: positiveInt.default(SLOW_CLIENT_DEFAULTS.uploadIdleMs),
  HTTP_UPLOAD_MIN_BYTES: positiveInt.default(SLOW_CLIENT_DEFAULTS.uploadMinBytes),
  HTTP_MAX_CONNECTIONS_PER_ADDRESS: z.coerce
    .number()
    .int()
    .min(0)
    .default(SLOW_CLIENT_DEFAULTS.maxConnectionsPerAddress),
  JOB_STREAM_HEARTBEAT_SECONDS: positiveInt.default(15),
  JOB_STREAM_RETRY_MS: positiveInt.default(5000),
  JOB_STREAMS_PER_CREDENTIAL: positiveInt.default(50),
  SEGMENTATION_RETRY_COOLDOWN_SECONDS: positiveInt.default(60),
  EXPORT_JPEG_QUALITY: z.coerce.number().int().min(1).max(100).default(90),
  PYRAMID_REGIONS_PER_JOB: positiveInt.default(4),
  SEGMENTATION_BANDS_PER_JOB: positiveInt.default(4),
  PREDICTION_BANDS_PER_JOB: positiveInt.default(4),
  SIGN_IN_FREE_FAILURES_PER_ACCOUNT: positiveInt.default(SIGN_IN_THROTTLE_DEFAULTS.freeFailuresPerAccount),
  SIGN_IN_FREE_FAILURES_PER_ADDRESS: z.coerce
    .number()
    .int()
    .min(0)
    .default(SIGN_IN_THROTTLE_DEFAULTS.freeFailuresPerAddress),
  SIGN_IN_DELAY_SECONDS: positiveInt.default(SIGN_IN_THROTTLE_DEFAULTS.delaySeconds),
  SIGN_IN_MAX_DELAY_SECONDS: positiveInt.default(SIGN_IN_THROTTLE_DEFAULTS.maxDelaySeconds),
  MAINTENANCE_INTERVAL_SECONDS: positiveInt.default(300),
  COMPUTE_HEARTBEAT_TIMEOUT_SECONDS: z.coerce.number().int().min(5).default(120),
  OAUTH_ISSUER: optionalUrl,
  OAUTH_JWKS_URL: optionalUrl,
  OAUTH_ACCESS_TOKEN_TTL_SECONDS: positiveInt.default(3600),
  OAUTH_REFRESH_TOKEN_TTL_SECONDS: positiveInt.default(30 * 24 * 3600),
  WORKFLOW_BUNDLE_PATH: z.string().optional(),
  WORKER_QUEUES: queueList,
  WORKER_IO_CONCURRENCY: positiveInt.default(WORKER_SLOT_DEFAULTS.io),
  WORKER_COMPUTE_CONCURRENCY: positiveInt.default(WORKER_SLOT_DEFAULTS.compute),
  WORKER_INFERENCE_CONCURRENCY: positiveInt.default(WORKER_SLOT_DEFAULTS.inference),
  TEMPORAL_CLI: z.string().default('temporal'),
  SPS_DEV_POSTGRES_PORT: port.default(54329),
  SPS_DEV_TEMPORAL_PORT: port.default(7233),
  SPS_DEV_TEMPORAL_UI_PORT: port.default(8233),
});
export type Env = z.input<typeof EnvSchema>;

/** The names of every variable read, for docs and deployment checks. */
export const configVariables = Object.keys(EnvSchema.shape);

export interface Config {
  dataDir: string;
  http: { host: string; port: number; publicBaseUrl: string; appUrl: string };
  logLevel: z.infer<typeof EnvSchema>['LOG_LEVEL'];
  database: { url: string | undefined; poolSize: number };
  temporal: { address: string | undefined; namespace: string; taskQueuePrefix: string };
  storage:
    | { backend: 'fs'; root: string }
    | {
        backend: 's3';
        bucket: string;
        region: string;
        endpoint?: string;
        accessKeyId?: string;
        secretAccessKey?: string;
        forcePathStyle: boolean;
      };
  signingSecret: string | undefined;
  /** The bearer token of `/metrics`; unset: loopback clients only. */
  metricsToken: string | undefined;
  /** Built-in authorization server unless `external` names another issuer. */
  oauth: {
    external?: { issuer: string; jwksUrl: string };
    accessTokenTtlSeconds: number;
    refreshTokenTtlSeconds: number;
  };
  workflowBundlePath: string | undefined;
  /** The task queues a worker process polls, and its activity slots on each. */
  worker: { queues: TaskQueueKind[]; slots: Record<TaskQueueKind, number> };
  /** Only for `npm start` / `npm test`: where the local stand-ins listen. */
  dev: { postgresPort: number; temporalPort: number; temporalUiPort: number; temporalCli: string };
  limits: SlowClientLimits & {
    signIn: SignInThrottlePolicy;
    ratePerSecond: number;
    rateBurst: number;
    jsonBodyBytes: number;
    uploadMaxBytes: number;
    uploadChunkMaxBytes: number;
    uploadSessionTtlSeconds: number;
    signedUrlTtlSeconds: number;
    streamHeartbeatMs: number;
    streamRetryMs: number;
    streamsPerCredential: number;
    segmentationRetryCooldownSeconds: number;
  };
  /** JPEG quality of the H&E in OME-TIFF exports. */
  exportJpegQuality: number;
  /** Activities of one job run at once: ingest's pyramid regions, segmentation's tile bands. */
  fanOut: { pyramidRegions: number; segmentationBands: number; predictionBands: number };
  /** Period of the `maintenance` Schedule (the reconcilers). */
  maintenanceIntervalSeconds: number;
  /** What the workflows this process starts are told of the deployment (their memo). */
  workflowSettings: Required<WorkflowSettingsMemo>;
}

export class ConfigError extends Error {}

function describeIssues(error: z.ZodError): string {
  return error.issues.map((issue) => `  ${issue.path.join('.') || '(env)'}: ${issue.message}`).join('\n');
}

/** Parses the environment once; a bad value stops start-up with one line per problem. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = EnvSchema.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== '')));
  if (!parsed.success) throw new ConfigError(`Invalid configuration:\n${describeIssues(parsed.error)}`);
  const e = parsed.data;
  if (e.STORAGE_BACKEND === 's3' && !e.S3_BUCKET) {
    throw new ConfigError('Invalid configuration:\n  S3_BUCKET: required when STORAGE_BACKEND=s3');
  }
  if (Boolean(e.OAUTH_ISSUER) !== Boolean(e.OAUTH_JWKS_URL)) {
    throw new ConfigError(
      'Invalid configuration:\n  OAUTH_ISSUER, OAUTH_JWKS_URL: set both (external issuer) or neither',
    );
  }
  const dataDir = path.resolve(e.SPS_DATA_DIR);
  const publicBaseUrl = (e.PUBLIC_BASE_URL ?? `http://${e.HOST}:${e.PORT}`).replace(/\/$/, '');
  return {
    dataDir,
    http: {
      host: e.HOST,
      port: e.PORT,
      publicBaseUrl,
      appUrl: (e.APP_URL ?? publicBaseUrl).replace(/\/$/, ''),
    },
    logLevel: e.LOG_LEVEL,
    database: { url: e.DATABASE_URL, poolSize: e.DATABASE_POOL_SIZE },
    temporal: {
      address: e.TEMPORAL_ADDRESS,
      namespace: e.TEMPORAL_NAMESPACE,
      taskQueuePrefix: e.TEMPORAL_TASK_QUEUE_PREFIX,
    },
    storage:
      e.STORAGE_BACKEND === 's3'
        ? {
            backend: 's3',
            bucket: e.S3_BUCKET!,
            region: e.S3_REGION,
            endpoint: e.S3_ENDPOINT,
            accessKeyId: e.S3_ACCESS_KEY_ID,
            secretAccessKey: e.S3_SECRET_ACCESS_KEY,
            forcePathStyle: e.S3_FORCE_PATH_STYLE,
          }
        : { backend: 'fs', root: path.resolve(e.STORAGE_FS_ROOT ?? path.join(dataDir, 'objects')) },
    signingSecret: e.SIGNING_SECRET,
    metricsToken: e.METRICS_TOKEN,
    oauth: {
      external:
        e.OAUTH_ISSUER && e.OAUTH_JWKS_URL
          ? { issuer: e.OAUTH_ISSUER, jwksUrl: e.OAUTH_JWKS_URL }
          : undefined,
      accessTokenTtlSeconds: e.OAUTH_ACCESS_TOKEN_TTL_SECONDS,
      refreshTokenTtlSeconds: e.OAUTH_REFRESH_TOKEN_TTL_SECONDS,
    },
    workflowBundlePath: e.WORKFLOW_BUNDLE_PATH,
    worker: {
      queues: e.WORKER_QUEUES,
      slots: {
        io: e.WORKER_IO_CONCURRENCY,
        compute: e.WORKER_COMPUTE_CONCURRENCY,
        inference: e.WORKER_INFERENCE_CONCURRENCY,
      },
    },
    dev: {
      postgresPort: e.SPS_DEV_POSTGRES_PORT,
      temporalPort: e.SPS_DEV_TEMPORAL_PORT,
      temporalUiPort: e.SPS_DEV_TEMPORAL_UI_PORT,
      temporalCli: e.TEMPORAL_CLI,
    },
    limits: {
      ratePerSecond: e.RATE_LIMIT_PER_SECOND,
      rateBurst: e.RATE_LIMIT_BURST,
      jsonBodyBytes: e.JSON_BODY_LIMIT_BYTES,
      uploadMaxBytes: e.UPLOAD_MAX_BYTES,
      uploadChunkMaxBytes: e.UPLOAD_CHUNK_MAX_BYTES,
      uploadSessionTtlSeconds: e.UPLOAD_SESSION_TTL_SECONDS,
      signedUrlTtlSeconds: e.SIGNED_URL_TTL_SECONDS,
      streamHeartbeatMs: e.JOB_STREAM_HEARTBEAT_SECONDS * 1000,
      streamRetryMs: e.JOB_STREAM_RETRY_MS,
      streamsPerCredential: e.JOB_STREAMS_PER_CREDENTIAL,
      segmentationRetryCooldownSeconds: e.SEGMENTATION_RETRY_COOLDOWN_SECONDS,
      headersTimeoutMs: e.HTTP_HEADERS_TIMEOUT_MS,
      bodyTimeoutMs: e.HTTP_BODY_TIMEOUT_MS,
      uploadIdleMs: e.HTTP_UPLOAD_IDLE_MS,
      uploadMinBytes: e.HTTP_UPLOAD_MIN_BYTES,
      maxConnectionsPerAddress: e.HTTP_MAX_CONNECTIONS_PER_ADDRESS,
      signIn: {
        freeFailuresPerAccount: e.SIGN_IN_FREE_FAILURES_PER_ACCOUNT,
        freeFailuresPerAddress: e.SIGN_IN_FREE_FAILURES_PER_ADDRESS,
        delaySeconds: e.SIGN_IN_DELAY_SECONDS,
        maxDelaySeconds: e.SIGN_IN_MAX_DELAY_SECONDS,
      },
    },
    exportJpegQuality: e.EXPORT_JPEG_QUALITY,
    fanOut: {
      pyramidRegions: e.PYRAMID_REGIONS_PER_JOB,
      segmentationBands: e.SEGMENTATION_BANDS_PER_JOB,
      predictionBands: e.PREDICTION_BANDS_PER_JOB,
    },
    maintenanceIntervalSeconds: e.MAINTENANCE_INTERVAL_SECONDS,
    workflowSettings: { computeHeartbeatTimeoutSeconds: e.COMPUTE_HEARTBEAT_TIMEOUT_SECONDS },
  };
}

/** Production entry points need every external dependency named explicitly. */
export function requireProductionConfig(config: Config): asserts config is Config & {
  database: { url: string };
  temporal: { address: string };
  signingSecret: string;
} {
  const missing = [
    config.database.url ? null : 'DATABASE_URL',
    config.temporal.address ? null : 'TEMPORAL_ADDRESS',
    config.signingSecret ? null : 'SIGNING_SECRET',
  ].filter((name): name is string => name !== null);
  if (missing.length > 0) {
    throw new ConfigError(
      `Invalid configuration:\n${missing.map((name) => `  ${name}: required`).join('\n')}`,
    );
  }
}
