import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';

/** axe-core's browser build, evaluated in the page (a DevTools evaluation: the page's CSP allows it). */
const axeSource = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/**
 * What axe-core finds wrong with the page as it stands (WCAG 2.x A and AA, and its best
 * practices): one line per rule broken, with its impact and the first elements that break it.
 */
export async function accessibilityViolations(page: Page): Promise<string[]> {
  await page.evaluate(axeSource);
  return page.evaluate<string[]>(`(async () => {
    const { violations } = await window.axe.run(document, { resultTypes: ['violations'] });
    return violations.map((v) => v.impact + ' ' + v.id + ': ' + v.help + ' (' +
      v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ') + ')');
  })()`);
}
