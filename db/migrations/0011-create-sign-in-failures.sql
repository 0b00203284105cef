-- Failed sign-ins on the authorization server's page, per account (`account:{email}`) and per
-- client address (`address:{ip}`): the growing delay of the sign-in throttle, shared by every
-- API replica. A row is forgotten a day after its last failure or at a successful sign-in.
CREATE TABLE sign_in_failures (
  key text PRIMARY KEY,
  failures integer NOT NULL,
  last_failure_at timestamptz NOT NULL,
  blocked_until timestamptz NOT NULL
);
