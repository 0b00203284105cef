import express, { type Express, type Request, Router } from 'express';
import type { Logger } from 'pino';
import type { Sql } from '../db';
import { createJobEventHub } from '../db/job-events';
import { markerCatalog } from '../models/registry';
import { type Endpoint, endpoints } from '../schemas/endpoints';
import { JOB_STREAM_DEFAULTS } from '../schemas/job-stream';
import { WEB_APP_ICON } from '../schemas/oauth';
import { API_PREFIX, buildOpenApiDocument } from '../schemas/openapi';
import type { ObjectStore } from '../storage';
import { authenticate } from './auth';
import { errorHandler, notFound } from './errors';
import { privateResponses } from './headers';
import { authorizationServerRoutes } from './oauth/routes';
import { createAuthorizationServer } from './oauth/server';
import { createSignInThrottle, SIGN_IN_THROTTLE_DEFAULTS, type SignInThrottlePolicy } from './oauth/throttle';
import { createTokenVerifier, remoteKeys } from './oauth/tokens';
import { type ApiMetrics, createMetrics, observeRequests } from './observability';
import { rateLimit } from './rate-limit';
import { methodGuard, mount, pathMatcher } from './route';
import { exportRoutes } from './routes/exports';
import { fileRoutes } from './routes/files';
import { healthRoutes } from './routes/health';
import { jobStreamRoutes } from './routes/job-stream';
import { jobRoutes } from './routes/jobs';
import { publicSampleRoutes } from './routes/public-samples';
import { referenceRoutes } from './routes/reference';
import { sampleRoutes } from './routes/samples';
import { segmentationRoutes } from './routes/segmentation';
import { storeLinkRoutes } from './routes/store-links';
import { uploadRoutes, uploadSessionRoutes } from './routes/uploads';
import { defaultWebRoot, webAppRoutes } from './routes/web-app';
import { createCatalogService } from './services/catalog';
import { createExportService } from './services/exports';
import { createJobStreamService, createStreamQuota, registerJobStreamMetrics } from './services/job-stream';
import { createJobService } from './services/jobs';
import { createPredictionService } from './services/predictions';
import { createPublicSampleService } from './services/public-samples';
import { createSampleListService } from './services/sample-list';
import { createSampleService } from './services/samples';
import { createSegmentationService } from './services/segmentation';
import { createStoreLinks } from './services/store-links';
import { createUploadService } from './services/uploads';
import { bodyDeadline, SLOW_CLIENT_DEFAULTS, type SlowClientLimits } from './slow-clients';
import type { WorkflowEngine } from './workflow-engine';

/**
 * OAuth 2.0: by default the same program is the authorization server (`{auth_url}` is
 * `publicBaseUrl`); with `external` the API only verifies tokens of that issuer.
 */
export interface OAuthSettings {
  external?: { issuer: string; jwksUrl: string };
  accessTokenTtlSeconds?: number;
  refreshTokenTtlSeconds?: number;
}

export interface ApiSettings {
  publicBaseUrl: string;
  /** Root of the web application, for `appUrl` fields. */
  appUrl: string;
  /** The built web application (vite's output); `dist/web` of this checkout by default. */
  webRoot?: string;
  signingSecret: string;
  oauth?: OAuthSettings;
  /**
   * The bearer token `/metrics` asks for; without one it answers loopback clients only
   * (docs/operations.md, Metrics).
   */
  metricsToken?: string;
  limits: {
    ratePerSecond: number;
    rateBurst: number;
    jsonBodyBytes: number;
    uploadMaxBytes: number;
    uploadChunkMaxBytes: number;
    uploadSessionTtlSeconds: number;
    /** Job stream heartbeat interval (DECISIONS.md: 15 s); tests shorten it. */
    streamHeartbeatMs?: number;
    /** The SSE `retry` of job streams (DECISIONS.md: 5000 ms). */
    streamRetryMs?: number;
    /** Open job streams per credential in one API process (default 50); past it 429. */
    streamsPerCredential?: number;
    /** Wait before a failed segmentation may be retried (DECISIONS.md: 60 s). */
    segmentationRetryCooldownSeconds?: number;
    /** The sign-in page's growing delay (api/oauth/throttle.ts); defaults for what is absent. */
    signIn?: Partial<SignInThrottlePolicy>;
  } & Partial<Pick<SlowClientLimits, 'bodyTimeoutMs' | 'uploadIdleMs' | 'uploadMinBytes'>>;
}

export interface ApiDeps {
  sql: Sql;
  store: ObjectStore;
  workflows: WorkflowEngine;
  logger: Logger;
  settings: ApiSettings;
  metrics?: ApiMetrics;
}

const uploadChunkPath = pathMatcher(endpoints.putUploadChunk);

/** An upload chunk's body is streamed to storage: bounded by progress, not by total time. */
const isUploadChunk = (req: Request) =>
  req.method === 'PUT' &&
  req.path.startsWith(API_PREFIX) &&
  uploadChunkPath.test(req.path.slice(API_PREFIX.length));

/** The HTTP application: validation, authorization and delegation only. */
export function createApp(deps: ApiDeps): Express {
  const { sql, store, workflows, logger, settings } = deps;
  const metrics = deps.metrics ?? createMetrics();
  const uploads = createUploadService({
    sql,
    store,
    workflows,
    logger,
    publicBaseUrl: settings.publicBaseUrl,
    signingSecret: settings.signingSecret,
    limits: settings.limits,
    onBytesStored: (count) => metrics.uploadedBytes.inc(count),
  });
  const segmentation = createSegmentationService({
    sql,
    store,
    workflows,
    logger,
    publicBaseUrl: settings.publicBaseUrl,
    retryCooldownSeconds: settings.limits.segmentationRetryCooldownSeconds,
  });
  const samples = createSampleService({
    sql,
    store,
    workflows,
    appUrl: settings.appUrl,
    segmentationState: segmentation.stateOf,
  });
  const lists = createSampleListService({
    sql,
    appUrl: settings.appUrl,
    signingSecret: settings.signingSecret,
  });
  const catalog = createCatalogService({ sql });
  const predictions = createPredictionService({ sql, workflows, logger });
  const storeLinks = createStoreLinks({
    store,
    publicBaseUrl: settings.publicBaseUrl,
    signingSecret: settings.signingSecret,
  });
  const jobs = createJobService({ sql, store, storeLinks, workflows, logger });
  const exports = createExportService({
    sql,
    store,
    workflows,
    segmentation,
    storeLinks,
    logger,
    publicBaseUrl: settings.publicBaseUrl,
  });
  // The process's one LISTEN connection, shared by every job stream.
  const jobEvents = createJobEventHub(sql, {
    onError: (err) => logger.warn({ err }, 'job event stream: database read failed, retrying'),
  });
  const jobStreams = createJobStreamService({
    sql,
    hub: jobEvents,
    heartbeatMs: settings.limits.streamHeartbeatMs ?? JOB_STREAM_DEFAULTS.heartbeatMs,
  });
  registerJobStreamMetrics(metrics.registry, jobEvents);
  const streamRetryMs = settings.limits.streamRetryMs ?? JOB_STREAM_DEFAULTS.retryMs;
  // Paths carry `/api/v1` themselves (health and OAuth sit outside it): the server is the origin.
  const openApiDocument = buildOpenApiDocument(settings.publicBaseUrl, {
    ...settings.limits,
    markers: markerCatalog().map((marker) => marker.name),
  });
  const publicSamples = createPublicSampleService({ sql, store });
  const oauth = settings.oauth ?? {};
  // RFC 8707: tokens are bound to `{base_url}`, and only such tokens are accepted here.
  const resource = `${settings.publicBaseUrl}${API_PREFIX}`;
  const authServer = oauth.external
    ? undefined
    : createAuthorizationServer({
        sql,
        logger,
        settings: {
          issuer: settings.publicBaseUrl,
          resource,
          cookieSecret: settings.signingSecret,
          // The API serves the web app under APP_URL's path at its own address too.
          iconUrl: `${settings.publicBaseUrl}${new URL(settings.appUrl).pathname.replace(/\/+$/, '')}/${WEB_APP_ICON}`,
          accessTokenTtlSeconds: oauth.accessTokenTtlSeconds ?? 3600,
          refreshTokenTtlSeconds: oauth.refreshTokenTtlSeconds ?? 30 * 24 * 3600,
        },
      });
  const verifyToken = oauth.external
    ? createTokenVerifier({
        issuer: oauth.external.issuer,
        audience: resource,
        keys: remoteKeys(oauth.external.jwksUrl),
      })
    : createTokenVerifier({
        issuer: settings.publicBaseUrl,
        audience: resource,
        keys: authServer!.verificationKeys,
        typ: 'at+jwt',
      });

  const table: Endpoint[] = Object.values(endpoints);
  const v1 = Router();
  v1.use(methodGuard(table.filter((endpoint) => !endpoint.root)));
  mount(v1, endpoints.openapi, (_input, _req, res) => {
    res.json(openApiDocument);
  });
  v1.use(referenceRoutes());
  v1.use(privateResponses());
  v1.use(uploadSessionRoutes(uploads));
  // The credential is checked before any body is read: a caller without one cannot hold a
  // connection by trickling a body (its answer closes the connection, api/errors.ts).
  v1.use(authenticate(sql, verifyToken));
  v1.use(rateLimit(sql, { ratePerSecond: settings.limits.ratePerSecond, burst: settings.limits.rateBurst }));
  v1.use(express.json({ limit: settings.limits.jsonBodyBytes }));
  v1.use(uploadRoutes(uploads));
  v1.use(sampleRoutes({ samples, lists, catalog }));
  v1.use(segmentationRoutes(segmentation));
  v1.use(
    jobStreamRoutes(jobStreams, {
      retryMs: streamRetryMs,
      quota: createStreamQuota(settings.limits.streamsPerCredential ?? JOB_STREAM_DEFAULTS.maxPerCredential),
    }),
  );
  v1.use(jobRoutes({ predictions, jobs }));
  v1.use(publicSampleRoutes(publicSamples));
  v1.use(exportRoutes(exports));
  v1.use((_req, _res, next) => next(notFound('endpoint')));

  const app = express();
  app.disable('x-powered-by');
  app.use(observeRequests(logger, metrics));
  app.use(
    bodyDeadline(
      {
        bodyTimeoutMs: settings.limits.bodyTimeoutMs ?? SLOW_CLIENT_DEFAULTS.bodyTimeoutMs,
        uploadIdleMs: settings.limits.uploadIdleMs ?? SLOW_CLIENT_DEFAULTS.uploadIdleMs,
        uploadMinBytes: settings.limits.uploadMinBytes ?? SLOW_CLIENT_DEFAULTS.uploadMinBytes,
      },
      isUploadChunk,
    ),
  );
  // Ahead of the method guard: it answers CORS preflights of store links itself.
  app.use(storeLinkRoutes(storeLinks));
  app.use(methodGuard(table.filter((endpoint) => endpoint.root)));
  app.use(healthRoutes({ sql, workflows, metrics, metricsToken: settings.metricsToken }));
  app.use(fileRoutes({ store, signingSecret: settings.signingSecret }));
  const throttle = createSignInThrottle({
    sql,
    logger,
    policy: { ...SIGN_IN_THROTTLE_DEFAULTS, ...settings.limits.signIn },
  });
  app.use(authorizationServerRoutes({ sql, server: authServer, throttle }));
  app.use(API_PREFIX, v1);
  app.use(
    webAppRoutes({
      appUrl: settings.appUrl,
      publicBaseUrl: settings.publicBaseUrl,
      webRoot: settings.webRoot ?? defaultWebRoot(),
    }),
  );
  app.use((_req, _res, next) => next(notFound('endpoint')));
  app.use(errorHandler(logger));
  return app;
}
