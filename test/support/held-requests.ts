import type { Page, Request } from 'playwright-core';

/**
 * Holds the page's requests to `url` (a Playwright glob) on their way until `release`, and
 * records them: what a page does while its request is out (a second click, a second drop).
 * `stop` releases them and lets later ones through unheld.
 */
export async function holdRequests(page: Page, url: string) {
  const held: Request[] = [];
  let release = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  await page.route(url, async (route) => {
    held.push(route.request());
    await released;
    await route.continue();
  });
  return {
    held,
    release,
    stop: async () => {
      release();
      await page.unroute(url);
    },
  };
}
