/**
 * The web view at the size the issue measured, in headless Chromium: 300 endpoints in 30 localities,
 * one zone unhealthy and one subzone draining. Drawn open it was 2,600 px tall on a desktop and
 * 5,400 on a phone, sorted by name with the unhealthy zone last. Now: it opens collapsed below the
 * zone level (short on both screens), the unhealthy and draining branches come first (by name on
 * request), and selecting a client opens and scrolls to the nodes of its priority 0.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, it, type TestContext } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { RawAdsStream } from './support/raw-ads.js';
import { midService } from './support/ui-mesh.js';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
];
const missingBrowser = existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is missing (apt-get install chromium)`;
const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';

function skipUnlessBrowser(t: TestContext): boolean {
  if (!missingBrowser) return false;
  if (process.env['CI'] === 'true') assert.fail(`the web view test must run in CI: ${missingBrowser}`);
  t.skip(missingBrowser);
  return true;
}

/** The tree's rows in document order, by locality path. */
const order = (page: Page) =>
  page.evaluate(`[...document.querySelectorAll('li.node')].map((n) => n.getAttribute('data-path'))`) as Promise<
    string[]
  >;
const treeHeight = (page: Page) =>
  page.evaluate(`Math.round(document.querySelector('#tree').getBoundingClientRect().height)`) as Promise<number>;

describe('the web view at 300 endpoints in 30 localities', () => {
  let canopy: CanopyProcess;
  let browser: Browser | undefined;
  let stream: RawAdsStream | undefined;
  before(async () => {
    if (missingBrowser) return;
    canopy = await startCanopyProcess({ server: { debounceMs: 20 }, services: [midService()] });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  });
  after(async () => {
    stream?.close();
    await browser?.close();
    await canopy?.stop();
  });

  for (const [screen, viewport, mobile] of [
    ['a desktop', { width: 1280, height: 800 }, false],
    ['a phone', { width: 390, height: 844 }, true],
  ] as const) {
    it(`opens collapsed below the zone level on ${screen}, unhealthy and draining branches first`, async (t) => {
      if (skipUnlessBrowser(t)) return;
      const page = await browser!.newPage({ viewport, isMobile: mobile, hasTouch: mobile });
      try {
        await page.goto(`${canopy.adminUrl}/ui/?service=mid`);
        await page.locator('li.node[data-path="r2/r2-z1"]').waitFor();
        const rows = await order(page);
        assert.equal(rows.length, 1 + 3 + 6, 'root, regions and zones; subzones folded');
        // r2 holds the unhealthy zone (10 of 20 subzone endpoints... 50 of 100 down), r1 the draining subzone.
        assert.deepEqual(rows, [
          '',
          'r2',
          'r2/r2-z1',
          'r2/r2-z0',
          'r1',
          'r1/r1-z0',
          'r1/r1-z1',
          'r0',
          'r0/r0-z0',
          'r0/r0-z1',
        ]);
        const height = await treeHeight(page);
        t.diagnostic(`tree height on ${screen}: ${height} px (was 2,600 on a desktop, 5,400 on a phone, drawn open)`);
        assert.ok(height < viewport.height * 1.5, `${height} px`);
        await page.selectOption('#order', 'name');
        await page.waitForFunction(`document.querySelectorAll('li.node')[1]?.getAttribute('data-path') === 'r0'`);
        assert.deepEqual((await order(page)).slice(1, 4), ['r0', 'r0/r0-z0', 'r0/r0-z1']);
      } finally {
        await page.close();
      }
    });
  }

  it('selecting a client opens and scrolls to its priority-0 nodes', async (t) => {
    if (skipUnlessBrowser(t)) return;
    stream = new RawAdsStream(canopy.xdsUri);
    const node = { id: 'mid-client', cluster: 'ui', locality: { region: 'r0', zone: 'r0-z1', sub_zone: 'r0-z1-s4' } };
    stream.send({ type_url: EDS, node, resource_names: ['mid'] });
    const cla = await stream.next(5000);
    stream.send({ type_url: EDS, version_info: cla.version_info, response_nonce: cla.nonce, resource_names: ['mid'] });
    const page = await browser!.newPage({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
    try {
      await page.goto(`${canopy.adminUrl}/ui/?service=mid`);
      assert.equal(await page.evaluate('window.scrollY'), 0);
      const leaf = page.locator('li.node[data-path="r0/r0-z1/r0-z1-s4"]');
      await page.locator('tr.client').first().waitFor({ timeout: 10_000 });
      assert.equal(await leaf.count(), 0, 'the client’s subzone starts folded');
      await page.locator('tr.client').first().click();
      await page.waitForFunction(
        `document.querySelector('li.node[data-path="r0/r0-z1/r0-z1-s4"]')?.getAttribute('data-tier') === '0'`,
        undefined,
        { timeout: 10_000 },
      );
      // In view: the page scrolled to it (it sits below the fold on a phone otherwise).
      const where = (await page.evaluate(`(() => {
        const r = document.querySelector('li.node[data-path="r0/r0-z1/r0-z1-s4"]').getBoundingClientRect();
        return { top: r.top, bottom: r.bottom, height: window.innerHeight, scrollY: window.scrollY };
      })()`)) as { top: number; bottom: number; height: number; scrollY: number };
      t.diagnostic(
        `priority-0 row at ${Math.round(where.top)}..${Math.round(where.bottom)} px, page scrolled ${where.scrollY} px`,
      );
      const inView = where.top >= 0 && where.bottom <= where.height;
      assert.ok(where.scrollY > 0, 'the page scrolled to it');
      assert.ok(inView, 'the priority-0 node is scrolled into view');
      // Only the branch that holds priority 0 opened: the other zones stay folded.
      assert.equal(await page.locator('li.node[data-path="r2/r2-z0/r2-z0-s0"]').count(), 0);
    } finally {
      await page.close();
    }
  });
});
