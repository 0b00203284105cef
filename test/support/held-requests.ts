import type { Locator, Page, Request } from 'playwright-core';

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

/**
 * A hurried user's double click: `button` clicked, then clicked again (forced, as a mouse does
 * not wait) while its request to `url` is held; then the request goes on and `settled` is
 * awaited. Answers the requests sent and whether the button was off between the clicks.
 */
export async function clickTwiceWhileHeld(
  page: Page,
  url: string,
  button: Locator,
  settled: () => Promise<unknown>,
): Promise<{ sent: Request[]; heldOff: boolean }> {
  const requests = await holdRequests(page, url);
  try {
    await button.click();
    const heldOff = await button.isDisabled();
    await button.click({ force: true });
    requests.release();
    await settled();
    return { sent: requests.held, heldOff };
  } finally {
    await requests.stop();
  }
}
