import path from 'node:path';
import { Router } from 'express';
import { endpoints, type referenceAssets } from '../../schemas/endpoints';
import { mount } from '../route';

type Asset = (typeof referenceAssets)[number];

/** Swagger UI's files, shipped in its npm package: the page loads nothing from elsewhere. */
const swaggerUiDir = path.dirname(require.resolve('swagger-ui-dist/package.json'));

/** Starts Swagger UI on the document this service serves; a file, so no inline script is needed. */
const start = `window.addEventListener('load', function () {
  window.ui = window.SwaggerUIBundle({
    url: 'openapi.json',
    dom_id: '#reference',
    deepLinking: true,
    validatorUrl: null,
    docExpansion: 'list',
    defaultModelsExpandDepth: 0,
    displayOperationId: true,
    showExtensions: true,
  });
});
`;
const style = `body { margin: 0; }
.swagger-ui .topbar { display: none; }
`;

/** Each asset: a file of the package, or a text of ours with its type. */
const assets: Record<Asset, { file: string } | { text: string; type: string }> = {
  'swagger-ui.css': { file: 'swagger-ui.css' },
  'swagger-ui-bundle.js': { file: 'swagger-ui-bundle.js' },
  'reference.css': { text: style, type: 'text/css' },
  'start.js': { text: start, type: 'text/javascript' },
};

/**
 * The page may load only from this service. Swagger UI sets inline style attributes, hence
 * 'unsafe-inline' for styles (never for scripts); `validatorUrl: null` keeps it from calling
 * the public validator.
 */
const contentSecurityPolicy = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

// Relative links: the page is `/api/v1/docs`, so `docs/x` is `/api/v1/docs/x`.
const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Slide Prediction Service API reference</title>
<link rel="stylesheet" href="docs/swagger-ui.css">
<link rel="stylesheet" href="docs/reference.css">
</head>
<body>
<div id="reference"></div>
<script src="docs/swagger-ui-bundle.js"></script>
<script src="docs/start.js"></script>
</body>
</html>
`;

/** The rendered API reference at `/api/v1/docs`, from the OpenAPI document the server serves. */
export function referenceRoutes(): Router {
  const router = Router();
  mount(router, endpoints.apiReference, (_input, _req, res) => {
    res.setHeader('Content-Security-Policy', contentSecurityPolicy);
    res.type('html').send(page);
  });
  mount(router, endpoints.apiReferenceAsset, (input, _req, res, next) => {
    res.setHeader('Content-Security-Policy', contentSecurityPolicy);
    const asset = assets[input.params.asset];
    if ('text' in asset) {
      res.type(asset.type).send(asset.text);
      return;
    }
    res.sendFile(asset.file, { root: swaggerUiDir, maxAge: '1h' }, (err) => {
      if (err) next(err);
    });
  });
  return router;
}
