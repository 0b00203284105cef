import path from 'node:path';
import { defineConfig, type Plugin } from 'vite';

const root = import.meta.dirname;

/** Each page of the app: its title and heading, and what its `<main>` holds besides the status line. */
const pages: Record<string, { title: string; body?: string }> = {
  samples: { title: 'Samples' },
  sample: { title: 'Sample' },
  trash: { title: 'Trash' },
  'public-sample': { title: 'Public sample' },
  upload: { title: 'Upload slides' },
  settings: { title: 'Settings' },
  callback: {
    title: 'Signing in',
    body: '<p id="progress" role="status">Finishing the sign-in…</p>',
  },
  'not-found': {
    title: 'Page not found',
    body: '<p>No page of this application is at this address. <a href="samples">Go to the samples</a>.</p>',
  },
};

/** The one shell every page shares: its script is `src/<page>.ts`. */
function shell(page: string, { title, body = '' }: { title: string; body?: string }): string {
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>${title} · Slide Prediction Service</title>
    <link rel="icon" type="image/svg+xml" href="/icon.svg" />
    <link rel="stylesheet" href="./src/style.css" />
    <script type="module" src="./src/${page}.ts"></script>
  </head>
  <body>
    <a class="skip" href="#main">Skip to content</a>
    <header>
      <nav aria-label="Main">
        <a href="samples">Samples</a>
        <a href="samples/trash">Trash</a>
        <a href="upload">Upload</a>
        <a href="settings">Settings</a>
      </nav>
    </header>
    <main id="main" tabindex="-1">
      <h1>${title}</h1>${body ? `\n      ${body}` : ''}
      <div id="status" role="alert" hidden></div>
    </main>
  </body>
</html>
`;
}

/** The pages as HTML entries that exist only here: `<root>/<page>.html` resolves to its shell. */
function pageShells(): Plugin {
  const files = new Map(
    Object.entries(pages).map(([page, content]) => [path.join(root, `${page}.html`), shell(page, content)]),
  );
  return {
    name: 'sps-page-shells',
    enforce: 'pre',
    resolveId: (id) => (files.has(path.resolve(root, id)) ? path.resolve(root, id) : undefined),
    load: (id) => files.get(id),
  };
}

/**
 * One HTML page per route (`appType: 'mpa'`): the API process maps `/samples`,
 * `/samples/{id}`, `/upload` and `/settings` to these files; nothing falls back to an index. A
 * browser at an address with no page gets `not-found.html`, as a 404.
 * `base: './'` lets the pages live under any APP_URL path (the server adds a `<base>`).
 * The icon is in `public/`, so it keeps its name (`icon.svg` beside the pages): the
 * authorization server's sign-in pages, which are not built here, link it too.
 */
export default defineConfig({
  root,
  base: './',
  appType: 'mpa',
  plugins: [pageShells()],
  build: {
    outDir: path.join(root, '..', 'dist', 'web'),
    emptyOutDir: true,
    // zarrita's lazy numcodecs chunks inline their WebAssembly (blosc about 600 kB, zstd 750 kB);
    // the pages read the service's stores with fzstd instead and never fetch them. Every chunk
    // a page loads is under 200 kB.
    chunkSizeWarningLimit: 800,
    rollupOptions: {
      input: Object.fromEntries(Object.keys(pages).map((page) => [page, path.join(root, `${page}.html`)])),
    },
  },
});
