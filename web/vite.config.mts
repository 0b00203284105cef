import path from 'node:path';
import { defineConfig } from 'vite';

const root = import.meta.dirname;

/**
 * One HTML page per route (`appType: 'mpa'`): the API process maps `/samples`,
 * `/samples/{id}`, `/upload` and `/settings` to these files; nothing falls back to an index.
 * `base: './'` lets the pages live under any APP_URL path (the server adds a `<base>`).
 */
export default defineConfig({
  root,
  base: './',
  appType: 'mpa',
  build: {
    outDir: path.join(root, '..', 'dist', 'web'),
    emptyOutDir: true,
    rollupOptions: {
      input: Object.fromEntries(
        ['samples', 'sample', 'trash', 'public-sample', 'upload', 'settings', 'callback'].map((page) => [
          page,
          path.join(root, `${page}.html`),
        ]),
      ),
    },
  },
});
