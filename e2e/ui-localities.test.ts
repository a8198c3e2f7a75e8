/**
 * The web view in headless Chromium (playwright-core), for what an operator reads off the tree:
 * - localities in natural order (`z3` before `z12`), as a person sorts them;
 * - draining, terminating and unhealthy endpoints drawn apart (chips, the bar, the node's dot), with a
 *   legend that names each.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, it, type TestContext } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';

const CHROMIUM = '/usr/bin/chromium';
/** The page's own function, in code run there (e2e/ is compiled without the DOM library). */
declare const getComputedStyle: (e: unknown) => Record<string, string>;
const missingBrowser = existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is missing (apt-get install chromium)`;

function skipUnlessBrowser(t: TestContext): boolean {
  if (!missingBrowser) return false;
  if (process.env['CI'] === 'true') assert.fail(`the web view test must run in CI: ${missingBrowser}`);
  t.skip(missingBrowser);
  return true;
}

const ep = (n: number, zone: string, health: string) => ({
  address: `10.0.0.${n}`,
  port: 80,
  locality: { region: 'r1', zone, subzone: 's1' },
  health,
});

describe('the web view: locality order and endpoint states', () => {
  let canopy: CanopyProcess;
  let browser: Browser | undefined;
  let page: Page;

  before(async () => {
    if (missingBrowser) return;
    const endpoints = [
      ep(1, 'z12', 'unhealthy'),
      ep(2, 'z3', 'draining'),
      ep(3, 'z20', 'terminating'),
      ep(4, 'z1', 'healthy'),
      ep(5, 'z2', 'healthy'),
    ];
    canopy = await startCanopyProcess({ services: [{ name: 'web', endpoints }] });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu'],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`${canopy.adminUrl}/ui/`);
    await page.locator('li.node[data-path="r1/z12/s1"]').waitFor();
  });
  after(async () => {
    await browser?.close();
    await canopy?.stop();
  });

  it('orders localities by name naturally: z1, z2, z3, z12, z20', async (t) => {
    if (skipUnlessBrowser(t)) return;
    await page.selectOption('#order', 'name');
    const zones = async () =>
      (await page.locator('li.node').evaluateAll((els) => els.map((e) => e.getAttribute('data-path') ?? ''))).filter(
        (p) => /^r1\/z\d+$/.test(p),
      );
    const deadline = Date.now() + 10_000;
    while ((await zones()).join() !== 'r1/z1,r1/z2,r1/z3,r1/z12,r1/z20' && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(await zones(), ['r1/z1', 'r1/z2', 'r1/z3', 'r1/z12', 'r1/z20']);
  });

  it('draws draining, terminating and unhealthy apart, and the legend names each', async (t) => {
    if (skipUnlessBrowser(t)) return;
    const chip = (state: string) => page.locator(`li.node .endpoint.${state}`).first();
    const style = (state: string) =>
      chip(state).evaluate((e) => {
        const c = getComputedStyle(e);
        return `${c.backgroundColor}|${c.borderTopColor}|${c.borderTopStyle}|${c.textDecorationLine}`;
      });
    const looks = new Set([
      await style('healthy'),
      await style('draining'),
      await style('terminating'),
      await style('unhealthy'),
    ]);
    assert.equal(looks.size, 4, `four distinct chips: ${[...looks].join(' / ')}`);
    // A node whose only endpoint drains is not drawn as one whose endpoint failed.
    const dot = (p: string) => page.locator(`li.node[data-path="${p}"] .dot`).evaluate((e) => getComputedStyle(e).fill);
    assert.notEqual(await dot('r1/z3'), await dot('r1/z12'), 'draining and unhealthy nodes');
    assert.equal(await dot('r1/z3'), await dot('r1/z20'), 'draining and terminating both wind down');
    assert.match(await page.locator('li.node[data-path="r1/z3"] .counts').innerText(), /0\/1 healthy, 1 draining/);
    const legend = page.locator('.chip-legend');
    assert.deepEqual(await legend.locator('.endpoint').allInnerTexts(), [
      'healthy',
      'draining',
      'terminating',
      'unhealthy',
    ]);
    for (const state of ['healthy', 'draining', 'terminating', 'unhealthy'])
      assert.equal(
        await legend.locator(`.endpoint.${state}`).evaluate((e) => getComputedStyle(e).backgroundColor),
        await chip(state).evaluate((e) => getComputedStyle(e).backgroundColor),
        `the legend's ${state} chip is the tree's`,
      );
  });
});
