import { createClient, type SpsClient } from '../../sdk';

/** The development credential: tab-scoped sessionStorage, never localStorage (issue 21). */
const API_KEY = 'sps.apiKey';

export function apiKey(): string | null {
  return sessionStorage.getItem(API_KEY);
}

export function setApiKey(key: string | null): void {
  if (key) sessionStorage.setItem(API_KEY, key);
  else sessionStorage.removeItem(API_KEY);
}

/**
 * The service root: the server names it in a meta tag when the API lives on another origin
 * than the pages; otherwise the pages' own origin.
 */
function serviceRoot(): string {
  const named = document.querySelector<HTMLMetaElement>('meta[name="sps-api-root"]')?.content;
  return named || location.origin;
}

/** The SDK client of this tab, or null when no credential is set. */
export function client(): SpsClient | null {
  const key = apiKey();
  return key ? createClient({ baseUrl: serviceRoot(), apiKey: key, maxRetries: 2 }) : null;
}
