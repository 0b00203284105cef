import {
  createRemoteJWKSet,
  type JWTPayload,
  type JWTVerifyGetKey,
  errors as joseErrors,
  jwtVerify,
} from 'jose';
import { OAuthScope } from '../../schemas/enums';
import { GRANT_CLAIM, ORGANIZATION_CLAIM } from '../../schemas/oauth';

/** What a verified access token says; the API still checks the membership behind it. */
export interface VerifiedToken {
  userId: string;
  organizationId: string;
  clientId: string;
  scopes: Set<OAuthScope>;
  /** The built-in server's grant; tokens of an external issuer have none. */
  grantId: string | undefined;
  tokenId: string | undefined;
}

export type TokenVerifier = (token: string) => Promise<VerifiedToken | undefined>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ASYMMETRIC_ALGS = [
  'ES256',
  'ES384',
  'ES512',
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'EdDSA',
];

/** A token is a JWT if it has three base64url parts; anything else is not ours to verify. */
export const looksLikeJwt = (token: string) => /^[\w-]+\.[\w-]+\.[\w-]+$/.test(token);

function toVerified(payload: JWTPayload): VerifiedToken | undefined {
  const organizationId = payload[ORGANIZATION_CLAIM];
  const grantId = payload[GRANT_CLAIM];
  const clientId = payload.client_id;
  if (typeof payload.sub !== 'string' || !UUID.test(payload.sub)) return undefined;
  if (typeof organizationId !== 'string' || !UUID.test(organizationId)) return undefined;
  const granted = typeof payload.scope === 'string' ? payload.scope.split(' ') : [];
  return {
    userId: payload.sub,
    organizationId,
    clientId: typeof clientId === 'string' ? clientId : '',
    scopes: new Set(granted.filter((scope) => OAuthScope.safeParse(scope).success) as OAuthScope[]),
    grantId: typeof grantId === 'string' ? grantId : undefined,
    tokenId: payload.jti,
  };
}

/**
 * Checks an access token with jose: signature against the issuer's JWKS, issuer, audience =
 * the API's resource (`{base_url}`), expiry, and the organization claim. Any failure is
 * `undefined` (the caller answers 401); only an unreachable JWKS is thrown.
 */
export function createTokenVerifier(options: {
  issuer: string;
  audience: string;
  keys: () => Promise<JWTVerifyGetKey>;
  /** `at+jwt` (RFC 9068) for our own server; external issuers do not all set it. */
  typ?: string;
}): TokenVerifier {
  return async (token) => {
    if (!looksLikeJwt(token)) return undefined;
    try {
      const { payload } = await jwtVerify(token, await options.keys(), {
        issuer: options.issuer,
        audience: options.audience,
        typ: options.typ,
        algorithms: ASYMMETRIC_ALGS,
        requiredClaims: ['exp', 'sub'],
      });
      return toVerified(payload);
    } catch (err) {
      if (err instanceof joseErrors.JOSEError && !(err instanceof joseErrors.JWKSTimeout)) return undefined;
      throw err;
    }
  };
}

/** The keys of an external issuer (Ory Hydra, ...): fetched from its JWKS URL and cached. */
export function remoteKeys(jwksUrl: string): () => Promise<JWTVerifyGetKey> {
  const keys = createRemoteJWKSet(new URL(jwksUrl));
  return async () => keys;
}
