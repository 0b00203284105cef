import type { Page } from 'playwright-core';

/**
 * A full-page screenshot into `file`. A page with the viewer is shot once its view is drawn (or
 * it said why there is none): a black canvas in a screenshot shows nothing of the slide.
 */
export async function screenshotPage(page: Page, file: string): Promise<void> {
  if ((await page.locator('#viewer').count()) > 0)
    await page
      .locator(
        '#viewer-canvas[data-state="complete"], #viewer [role="alert"]:not([hidden]), #viewer > p.note',
      )
      .waitFor();
  await page.screenshot({ path: file, fullPage: true });
}
