-- The built-in OAuth 2.0 authorization server (oidc-provider) and the public cohort.

-- Sign-in on the authorization server's page; scrypt, see api/oauth/passwords.ts.
ALTER TABLE users ADD COLUMN password_hash text CHECK (password_hash LIKE 'scrypt$%');

-- Registered by `admin oauth-client create`; `metadata` is the client metadata oidc-provider
-- reads (redirect_uris, token_endpoint_auth_method, client_secret for confidential clients).
CREATE TABLE oauth_clients (
  client_id text PRIMARY KEY,
  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  metadata jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);

-- Every other oidc-provider model (sessions, interactions, codes, refresh tokens, grants), one
-- row per (model, id); the indexed columns are the look-ups the adapter contract needs.
CREATE TABLE oauth_payloads (
  model text NOT NULL,
  id text NOT NULL,
  payload jsonb NOT NULL,
  grant_id text,
  user_code text,
  uid text,
  expires_at timestamptz,
  consumed_at timestamptz,
  PRIMARY KEY (model, id)
);
CREATE INDEX oauth_payloads_grant ON oauth_payloads (grant_id) WHERE grant_id IS NOT NULL;
CREATE INDEX oauth_payloads_uid ON oauth_payloads (uid) WHERE uid IS NOT NULL;
CREATE INDEX oauth_payloads_user_code ON oauth_payloads (user_code) WHERE user_code IS NOT NULL;
CREATE INDEX oauth_payloads_expires ON oauth_payloads (expires_at) WHERE expires_at IS NOT NULL;

-- The organization the user picked on the consent page, per grant: every access token of the
-- grant (first and refreshed) carries it.
CREATE TABLE oauth_grant_organizations (
  grant_id text PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Access-token signing keys (private JWK), made at first start so that every replica and every
-- restart signs and verifies with the same key. The newest unretired key signs.
CREATE TABLE oauth_signing_keys (
  kid text PRIMARY KEY,
  private_jwk jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  retired_at timestamptz
);

-- A sample published into the public cohort: `samples.public_id` says that it is public (the
-- `public` field), this row which prediction's marker channels are readable by everyone.
CREATE TABLE public_samples (
  sample_id uuid PRIMARY KEY REFERENCES samples (id) ON DELETE CASCADE,
  public_id uuid NOT NULL UNIQUE,
  job_id uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  markers text[] NOT NULL CHECK (cardinality(markers) > 0),
  display_name text NOT NULL CHECK (length(display_name) BETWEEN 1 AND 200),
  published_by uuid REFERENCES users (id) ON DELETE SET NULL,
  published_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX samples_public_newest ON samples (created_at DESC, public_id DESC) WHERE public_id IS NOT NULL;
