import type { UserOrganization } from '../../db/oauth';

/** The authorization server's few pages: plain server-rendered HTML, every value escaped. */

/**
 * Headers of every page of the authorization server, its error pages included: no script, and
 * no framing (no clickjacking of a sign-in or a consent). No `form-action`: after the consent,
 * the redirect goes to the client's origin. The one image is the web app's icon.
 */
function pageHeaders(iconUrl: string) {
  return {
    'cache-control': 'no-store',
    'content-security-policy': `default-src 'none'; style-src 'unsafe-inline'; img-src ${new URL(iconUrl).origin}; base-uri 'none'; frame-ancestors 'none'`,
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
  };
}

const ENTITIES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};
export const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => ENTITIES[char]!);

function page(iconUrl: string, title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Slide Prediction Service</title>
<link rel="icon" type="image/svg+xml" href="${escapeHtml(iconUrl)}">
<style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem;color:#1d1d1f}
.service{color:#23395d;font-weight:600;margin:0}
label{display:block;margin:.75rem 0}input[type=email],input[type=password]{font:inherit;width:100%;padding:.4rem;box-sizing:border-box}
.error{color:#8b1111;background:#fde8e8;border:1px solid #e5a1a1;padding:.5rem .75rem;border-radius:4px}
button{font:inherit;margin:.75rem .5rem 0 0;padding:.35rem .9rem;border:1px solid #23395d;background:#fff;color:#23395d;border-radius:4px;cursor:pointer}
.primary{background:#23395d;color:#fff}
:focus-visible{outline:3px solid #e08e0b;outline-offset:2px}li{list-style:none}</style>
</head><body><header><p class="service">Slide Prediction Service</p></header>
<main><h1>${escapeHtml(title)}</h1>${body}</main></body></html>`;
}

function signInPage(
  iconUrl: string,
  input: {
    action: string;
    clientName: string;
    email?: string;
    error?: string;
  },
): string {
  return page(
    iconUrl,
    'Sign in',
    `<p>${escapeHtml(input.clientName)} asks to use the Slide Prediction Service on your behalf.</p>
${input.error ? `<p class="error" role="alert">${escapeHtml(input.error)}</p>` : ''}
<form method="post" action="${escapeHtml(input.action)}">
<label>Email <input type="email" name="email" autocomplete="username" required value="${escapeHtml(input.email ?? '')}"></label>
<label>Password <input type="password" name="password" autocomplete="current-password" required></label>
<button type="submit" class="primary">Sign in</button></form>`,
  );
}

function consentPage(
  iconUrl: string,
  input: {
    action: string;
    clientName: string;
    email: string;
    scopes: readonly string[];
    resource: string;
    organizations: readonly UserOrganization[];
    error?: string;
  },
): string {
  const choices = input.organizations
    .map(
      (org, index) =>
        `<li><label><input type="radio" name="organization" value="${escapeHtml(org.id)}"${index === 0 ? ' checked' : ''} required> ${escapeHtml(org.name)} (${escapeHtml(org.role)})</label></li>`,
    )
    .join('\n');
  const scopes = input.scopes.map((scope) => `<li><code>${escapeHtml(scope)}</code></li>`).join('\n');
  return page(
    iconUrl,
    'Allow access',
    `<p>Signed in as ${escapeHtml(input.email)}.</p>
<p><strong>${escapeHtml(input.clientName)}</strong> asks for access to <code>${escapeHtml(input.resource)}</code> with:</p>
<ul>${scopes}</ul>
${input.error ? `<p class="error" role="alert">${escapeHtml(input.error)}</p>` : ''}
<form method="post" action="${escapeHtml(input.action)}">
<p>For which organization?</p>
<ul>${choices || '<li>You belong to no organization.</li>'}</ul>
<button type="submit" class="primary" name="decision" value="allow"${choices ? '' : ' disabled'}>Allow</button>
<button type="submit" name="decision" value="deny" formnovalidate>Deny</button></form>`,
  );
}

function errorPage(iconUrl: string, error: string, description?: string): string {
  return page(
    iconUrl,
    'Authorization failed',
    `<p><code>${escapeHtml(error)}</code></p><p>${escapeHtml(description ?? '')}</p>`,
  );
}

/** The pages and their headers, showing the web app's icon from `iconUrl`. */
export function authorizationPages(iconUrl: string) {
  return {
    headers: pageHeaders(iconUrl),
    signIn: (input: Parameters<typeof signInPage>[1]) => signInPage(iconUrl, input),
    consent: (input: Parameters<typeof consentPage>[1]) => consentPage(iconUrl, input),
    error: (error: string, description?: string) => errorPage(iconUrl, error, description),
  };
}

export type AuthorizationPages = ReturnType<typeof authorizationPages>;
