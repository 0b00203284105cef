import { z } from 'zod';
import { oauthScopes } from './enums';

/** The OAuth 2.0 authorization server's request shapes and its RFC 8414 metadata. */

/** Routes of the authorization server, relative to `{auth_url}` (DESIGN.md: `/oauth2/...`). */
export const oauthRoutes = {
  authorization: '/oauth2/auth',
  token: '/oauth2/token',
  revocation: '/oauth2/revoke',
  jwks: '/oauth2/jwks',
  interaction: '/oauth2/interaction',
  metadata: '/.well-known/oauth-authorization-server',
} as const;

/** The claim of an access token that names the organization the user consented for. */
export const ORGANIZATION_CLAIM = 'org_id';
/** The claim that names the grant, so the API can tell a revoked grant's tokens. */
export const GRANT_CLAIM = 'grant_id';

export const InteractionParams = z.object({
  uid: z
    .string()
    .min(1)
    .max(200)
    .meta({ description: 'The sign-in interaction, from the authorization redirect' }),
});

export const SignInForm = z.object({
  email: z.string().trim().min(3).max(320),
  password: z.string().min(1).max(1000),
});

export const ConsentForm = z.object({
  organization: z.uuid().optional(),
  decision: z.enum(['allow', 'deny']),
});

export const AuthorizationServerMetadata = z
  .object({
    issuer: z.string(),
    authorization_endpoint: z.string(),
    token_endpoint: z.string(),
    revocation_endpoint: z.string(),
    jwks_uri: z.string(),
    response_types_supported: z.array(z.literal('code')),
    grant_types_supported: z.array(z.enum(['authorization_code', 'refresh_token'])),
    code_challenge_methods_supported: z.array(z.literal('S256')),
    scopes_supported: z.array(z.enum(oauthScopes)),
    token_endpoint_auth_methods_supported: z.array(z.string()),
    revocation_endpoint_auth_methods_supported: z.array(z.string()),
    authorization_response_iss_parameter_supported: z.boolean(),
    resource_indicators_supported: z.boolean(),
  })
  .meta({ id: 'AuthorizationServerMetadata' });
export type AuthorizationServerMetadata = z.infer<typeof AuthorizationServerMetadata>;

/**
 * The web application's client: public (PKCE, no secret), registered by `npm start` and by
 * `admin oauth-client web-app` with the one redirect URI below its APP_URL.
 */
export const WEB_APP_CLIENT_ID = 'sps-web-app';
/** Where the authorization server sends the browser back, relative to APP_URL. */
export const WEB_APP_CALLBACK_PATH = '/signin/callback';
/** The web app's icon, relative to APP_URL (`web/public/`): the sign-in pages show it too. */
export const WEB_APP_ICON = 'icon.svg';

/** A token endpoint answer (RFC 6749 5.1); the refresh token is new on every refresh. */
export const TokenResponse = z.object({
  access_token: z.string().min(1),
  token_type: z.string().regex(/^bearer$/i),
  expires_in: z.number().int().positive(),
  refresh_token: z.string().min(1).optional(),
  scope: z.string().optional(),
});
export type TokenResponse = z.infer<typeof TokenResponse>;

/** An RFC 6749 5.2 error answer of the token and revocation endpoints. */
export const OAuthErrorResponse = z.object({
  error: z.string(),
  error_description: z.string().optional(),
});
