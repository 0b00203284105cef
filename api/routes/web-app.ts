import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import express, { type RequestHandler, Router } from 'express';
import { WEB_APP_CALLBACK_PATH, WEB_APP_ICON } from '../../schemas/oauth';
import { AppError } from '../errors';

/** Each route of the web application and the page (a vite `mpa` entry) that answers it. */
const pages: [route: string, file: string][] = [
  ['/samples', 'samples.html'],
  ['/samples/trash', 'trash.html'],
  ['/samples/:id', 'sample.html'],
  ['/public/samples/:publicId', 'public-sample.html'],
  ['/upload', 'upload.html'],
  ['/settings', 'settings.html'],
  // The sign-in's redirect URI: the authorization server sends the browser back here.
  [WEB_APP_CALLBACK_PATH, 'callback.html'],
];

/** The built app of this checkout: `dist/web` beside the package.json above this module. */
export function defaultWebRoot(): string {
  let dir = __dirname;
  while (!existsSync(path.join(dir, 'package.json')) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return path.join(dir, 'dist', 'web');
}

function originOf(url: string): string {
  return new URL(url).origin;
}

/**
 * Pages run only code and styles of this origin, may talk only to the API, and may not be
 * framed (issue 21, "Quality of a real web app").
 */
function securityHeaders(apiOrigin: string | undefined): RequestHandler {
  const connect = ["'self'", apiOrigin].filter(Boolean).join(' ');
  const policy = [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data: blob:",
    `connect-src ${connect}`,
    "worker-src 'self' blob:",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
  return (_req, res, next) => {
    res.set({
      'content-security-policy': policy,
      'x-content-type-options': 'nosniff',
      'x-frame-options': 'DENY',
      'referrer-policy': 'no-referrer',
    });
    next();
  };
}

/**
 * The web application at `APP_URL` (DECISIONS.md: by default the service's own origin): a
 * sample's `appUrl` and a list page's `appUrl` resolve to pages that load their data through
 * the SDK. The pages get a `<base>` for the APP_URL path and, when the API lives on another
 * origin, its root in a meta tag.
 */
export function webAppRoutes(settings: { appUrl: string; publicBaseUrl: string; webRoot: string }): Router {
  const prefix = new URL(settings.appUrl).pathname.replace(/\/+$/, '');
  const apiOrigin =
    originOf(settings.publicBaseUrl) === originOf(settings.appUrl)
      ? undefined
      : originOf(settings.publicBaseUrl);
  const head = [
    `<base href="${prefix}/">`,
    apiOrigin ? `<meta name="sps-api-root" content="${settings.publicBaseUrl}">` : '',
  ].join('');
  // Read on each request, not cached: a rebuild of the app (`npm test` beside `npm start`)
  // replaces the hashed assets, and a page kept from before would name ones that are gone.
  async function page(file: string): Promise<string> {
    const text = await readFile(path.join(settings.webRoot, file), 'utf8').catch(() => {
      throw new AppError(
        'unavailable',
        'the web application is not built: run `npm start` (or the vite build)',
      );
    });
    return text.replace('<head>', `<head>${head}`);
  }

  const app = Router();
  app.use(securityHeaders(apiOrigin));
  app.get('/', (_req, res) => res.redirect(`${prefix}/samples`));
  for (const [route, file] of pages) {
    app.get(route, async (_req, res) => {
      res
        .type('html')
        .set('cache-control', 'no-cache')
        .send(await page(file));
    });
  }
  app.use(
    '/assets',
    express.static(path.join(settings.webRoot, 'assets'), { immutable: true, maxAge: '1y' }),
  );
  app.get(`/${WEB_APP_ICON}`, (_req, res, next) => {
    res.sendFile(path.join(settings.webRoot, WEB_APP_ICON), { maxAge: '1d' }, (err) => {
      if (err && !res.headersSent) next();
    });
  });
  // A person at an address with no page gets a page of the app, with its links; programs (who
  // do not prefer HTML) go on to the contract's JSON error after this router.
  app.use(async (req, res, next) => {
    const browsing =
      (req.method === 'GET' || req.method === 'HEAD') && req.accepts(['json', 'html']) === 'html';
    if (!browsing) return next();
    res
      .status(404)
      .type('html')
      .set('cache-control', 'no-cache')
      .send(await page('not-found.html'));
  });
  const router = Router();
  router.use(prefix || '/', app);
  return router;
}
