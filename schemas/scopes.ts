import type { EndpointName } from './endpoints';
import type { OAuthScope } from './enums';

/**
 * The scope matrix: what an OAuth access token must carry to call each endpoint (API keys
 * carry every scope). `api/route.ts` enforces it for every endpoint the `mount` call serves,
 * and docs/api.md prints it; the types make an endpoint without an entry a compile error.
 */

/** What a rule may look at: the parsed JSON body and the query, before validation. */
export interface ScopeRequest {
  body: unknown;
  query: unknown;
}

export type ScopeRule =
  /** Not a bearer endpoint: no credential, or its own (a signed link). */
  | { kind: 'none' }
  /** Every listed scope. */
  | { kind: 'all'; scopes: readonly OAuthScope[] }
  /** Scopes that depend on the request (contract rule 6, dry runs). */
  | { kind: 'conditional'; describe: string; scopes: (request: ScopeRequest) => readonly OAuthScope[] };

const none: ScopeRule = { kind: 'none' };
const all = (...scopes: OAuthScope[]): ScopeRule => ({ kind: 'all', scopes });

function flag(source: unknown, name: string): boolean {
  if (typeof source !== 'object' || source === null) return false;
  const value = (source as Record<string, unknown>)[name];
  // A query string carries 'true'; the JSON body a boolean. Anything else fails validation later.
  return value === true || value === 'true';
}

/**
 * Contract rule 6: an export that includes segmentation or the original upload also needs
 * `samples:read`. Every export endpoint's rule is built here, from the scopes it needs anyway
 * and where its selection is (the body of a request, the query of a read).
 */
export function exportScopes(base: readonly OAuthScope[], from: 'body' | 'query'): ScopeRule {
  return {
    kind: 'conditional',
    describe: `${base.join(' + ')}; + samples:read when includeSegmentation or includeOriginalUpload is true`,
    scopes: (request) => {
      const selection = request[from];
      const needsSampleRead =
        flag(selection, 'includeSegmentation') || flag(selection, 'includeOriginalUpload');
      return needsSampleRead && !base.includes('samples:read') ? [...base, 'samples:read'] : base;
    },
  };
}

/** A dry run prices (`samples:read`: "estimates"); a submission starts a run and spends credits. */
const predictScopes: ScopeRule = {
  kind: 'conditional',
  describe: 'dry run: samples:read; submission: jobs:write + credits:spend',
  scopes: (request) => (flag(request.body, 'dryRun') ? ['samples:read'] : ['jobs:write', 'credits:spend']),
};

const rules = {
  healthz: none,
  readyz: none,
  metrics: none,
  signedFile: none,
  readStoreKey: none,
  openapi: none,
  apiReference: none,
  apiReferenceAsset: none,
  putUploadChunk: none,
  oauthMetadata: none,
  oauthAuthorize: none,
  oauthAuthorizeResume: none,
  oauthToken: none,
  oauthRevoke: none,
  oauthJwks: none,
  oauthInteraction: none,
  oauthSignIn: none,
  oauthConsent: none,
  createUpload: all('samples:write'),
  listUploads: all('samples:read'),
  getUpload: all('samples:read'),
  completeUpload: all('samples:write'),
  listSamples: all('samples:read'),
  listTrash: all('samples:read'),
  getSample: all('samples:read'),
  // Rule 5: the answer holds read-only sample and job data.
  patchSample: all('samples:read', 'samples:write'),
  // Same answer as PATCH (the sample detail).
  deleteSample: all('samples:read', 'samples:write'),
  restoreSample: all('samples:write'),
  setExpiration: all('samples:write'),
  bulkExpiration: all('samples:write'),
  setRetention: all('samples:write'),
  bulkRetention: all('samples:write'),
  listFields: all('samples:read'),
  listMarkers: all('samples:read'),
  predict: predictScopes,
  estimatePrediction: all('samples:read'),
  getJob: all('jobs:read'),
  streamJob: all('jobs:read'),
  cancelJob: all('jobs:write'),
  getJobResults: all('results:read'),
  getJobResultFile: all('results:read'),
  getSegmentation: all('samples:read'),
  startSegmentation: all('jobs:write'),
  getSegmentationManifest: all('results:read'),
  getSegmentationFile: all('results:read'),
  getPublicZarrFile: all('samples:read'),
  getPublicThumbnail: all('samples:read'),
  requestExport: exportScopes(['jobs:write'], 'body'),
  getExport: exportScopes(['results:read'], 'query'),
  getHeFile: all('samples:read'),
} satisfies Record<string, ScopeRule>;

/**
 * Every endpoint's rule: a new endpoint without one fails to compile. (Not a `satisfies` on the
 * literal, so a rule may land before its endpoint does.)
 */
export const scopeRules: Record<EndpointName, ScopeRule> = rules;

/** The scopes a request needs; empty for endpoints outside the bearer credential. */
export function requiredScopes(rule: ScopeRule, request: ScopeRequest): readonly OAuthScope[] {
  switch (rule.kind) {
    case 'none':
      return [];
    case 'all':
      return rule.scopes;
    case 'conditional':
      return rule.scopes(request);
  }
}

/** The matrix as docs/api.md prints it: one line per endpoint. */
export function describeScopeRule(rule: ScopeRule): string {
  switch (rule.kind) {
    case 'none':
      return '(no bearer credential)';
    case 'all':
      return rule.scopes.join(' + ');
    case 'conditional':
      return rule.describe;
  }
}
