import { oauthScopes } from '../../schemas/enums';
import { WEB_APP_CALLBACK_PATH, WEB_APP_CLIENT_ID } from '../../schemas/oauth';
import {
  createClient,
  createOAuthClient,
  type PendingAuthorization,
  refreshingCredential,
  type SpsClient,
  type TokenSet,
} from '../../sdk';

/**
 * The tab's credential: an OAuth sign-in (tokens) or a development API key. Both live in
 * sessionStorage, which ends with the tab and survives its reloads; nothing goes to
 * localStorage (issue 21).
 */
const API_KEY = 'sps.apiKey';
const TOKENS = 'sps.oauth.tokens';
const PENDING = 'sps.oauth.pending';
/** Fired on `window` whenever the tab signs in or out, so the header can follow. */
export const SESSION_EVENT = 'sps:session';

/**
 * The page's one refreshing credential: every refresh spends the refresh token, so two holders
 * of the same one would make the server see a reuse and end the grant.
 */
let credential: ReturnType<typeof refreshingCredential> | undefined;

export function apiKey(): string | null {
  return sessionStorage.getItem(API_KEY);
}

export function setApiKey(key: string | null): void {
  if (key) sessionStorage.setItem(API_KEY, key);
  else sessionStorage.removeItem(API_KEY);
  window.dispatchEvent(new Event(SESSION_EVENT));
}

/**
 * The service root: the server names it in a meta tag when the API lives on another origin
 * than the pages; otherwise the pages' own origin.
 */
function serviceRoot(): string {
  const named = document.querySelector<HTMLMetaElement>('meta[name="sps-api-root"]')?.content;
  return (named || location.origin).replace(/\/+$/, '');
}

/** The app's root (APP_URL): the server's `<base>` names it. */
export function appRoot(): string {
  return new URL('.', document.baseURI).href.replace(/\/+$/, '');
}

/** The built-in authorization server and the app's registered public client. */
function oauth() {
  const root = serviceRoot();
  return createOAuthClient({
    issuer: root,
    clientId: WEB_APP_CLIENT_ID,
    redirectUri: `${appRoot()}${WEB_APP_CALLBACK_PATH}`,
    resource: `${root}/api/v1`,
  });
}

function readJson<T>(key: string): T | null {
  const text = sessionStorage.getItem(key);
  if (!text) return null;
  try {
    return JSON.parse(text) as T;
  } catch {
    return null;
  }
}

export function signedIn(): TokenSet | null {
  return readJson<TokenSet>(TOKENS);
}

function saveTokens(tokens: TokenSet | null): void {
  if (!tokens) credential = undefined;
  if (tokens) sessionStorage.setItem(TOKENS, JSON.stringify(tokens));
  else sessionStorage.removeItem(TOKENS);
  window.dispatchEvent(new Event(SESSION_EVENT));
}

/**
 * Sends the browser to the authorization server's sign-in; it comes back to the callback page,
 * then to `returnTo` (the samples list when that is the callback itself).
 */
export async function startSignIn(from: string): Promise<void> {
  const callback = `${appRoot()}${WEB_APP_CALLBACK_PATH}`;
  const returnTo = from.startsWith(callback) ? `${appRoot()}/samples` : from;
  const { url, pending } = await oauth().authorizationUrl(oauthScopes);
  sessionStorage.setItem(PENDING, JSON.stringify({ ...pending, returnTo }));
  location.assign(url);
}

/** Exchanges the callback's code for tokens; answers the page to go back to. */
export async function finishSignIn(callback: URL): Promise<string> {
  const pending = readJson<PendingAuthorization & { returnTo: string }>(PENDING);
  sessionStorage.removeItem(PENDING);
  if (!pending) throw new Error('This tab started no sign-in (or already finished it): sign in again.');
  saveTokens(await oauth().finishAuthorization(callback, pending));
  // Only a page of this app: the stored address is the tab's own, but stay on the safe side.
  return pending.returnTo.startsWith(`${appRoot()}/`) ? pending.returnTo : `${appRoot()}/samples`;
}

/** Revokes the grant at the server (RFC 7009), then forgets the tokens. */
export async function signOut(): Promise<void> {
  const tokens = signedIn();
  if (!tokens) return;
  try {
    await oauth().revoke(tokens);
  } finally {
    saveTokens(null);
  }
}

function newCredential(tokens: TokenSet) {
  const server = oauth();
  return refreshingCredential({
    tokens,
    refresh: (current) => server.refresh(current),
    onTokens: saveTokens,
  });
}

/**
 * The SDK client of this tab, or null when no credential is set. A sign-in wins over a key;
 * its access token is refreshed (rotating the refresh token) before it expires and once on 401.
 */
export function client(): SpsClient | null {
  const tokens = signedIn();
  if (tokens) {
    credential ??= newCredential(tokens);
    return createClient({
      baseUrl: serviceRoot(),
      apiKey: credential.accessToken,
      onUnauthorized: credential.onUnauthorized,
      maxRetries: 2,
    });
  }
  const key = apiKey();
  return key ? createClient({ baseUrl: serviceRoot(), apiKey: key, maxRetries: 2 }) : null;
}
