/**
 * The web view at real size in headless Chromium: `canopy serve` with a 500-locality, 10,000-endpoint
 * service (10 regions × 5 zones × 10 subzones × 20 endpoints) and a small one whose leaf lists more
 * endpoints than it shows. What a user of a big mesh needs: the tree opens collapsed below the zone
 * level, nodes expand, search finds a locality or an address, the capped endpoint lists say so, "+N
 * more" opens, addresses sort as numbers, a health flip shows, the tree is a tree to assistive
 * technology, and when the server goes away a banner says the data is stale. With a token and none
 * given, the token prompt opens.
 *
 * It also prints first render, update after a flip and the longest task (not asserted: timings are
 * for the benchmark, `npm run bench:ui`, not for a test).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { CONTRAST_CHECK } from './support/contrast.js';
import { bigService } from './support/ui-mesh.js';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
];
const missingBrowser = existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is missing (apt-get install chromium)`;

function skipUnlessBrowser(t: TestContext): boolean {
  if (!missingBrowser) return false;
  if (process.env['CI'] === 'true') assert.fail(`the web view test must run in CI: ${missingBrowser}`);
  t.skip(missingBrowser);
  return true;
}

/** One leaf of 30 endpoints, written in text order (10.0.0.1, 10.0.0.10, 10.0.0.11, …). */
function smallService(): object {
  const addresses = Array.from({ length: 30 }, (_, i) => `10.200.0.${i + 1}`).sort();
  return {
    name: 'small',
    endpoints: addresses.map((address) => ({ address, port: 80, locality: { region: 'a', zone: 'a1', subzone: 'x' } })),
  };
}

/** Two racks in strict mode: a client in one gets nothing from the other, whose row is dimmed. */
function strictService(): object {
  return {
    name: 'strict',
    loadBalancing: { mode: 'strict' },
    endpoints: ['x', 'y'].map((subzone, i) => ({
      address: `10.201.0.${i + 1}`,
      port: 80,
      locality: { region: 'a', zone: 'a1', subzone },
    })),
  };
}

const rows = (page: Page) => page.locator('li.node');
const row = (page: Page, p: string) => page.locator(`li.node[data-path="${p}"]`);

describe('the web view at 500 localities and 10,000 endpoints', () => {
  let canopy: CanopyProcess;
  let browser: Browser | undefined;
  let page: Page;
  before(async () => {
    if (missingBrowser) return;
    canopy = await startCanopyProcess({
      server: { debounceMs: 20 },
      services: [bigService(), smallService(), strictService()],
    });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    // The longest main-thread task, as the browser reports them.
    await page.addInitScript(`
      window.longest = 0;
      new PerformanceObserver((list) => {
        for (const e of list.getEntries()) window.longest = Math.max(window.longest, e.duration);
      }).observe({ type: 'longtask', buffered: true });
    `);
  });
  after(async () => {
    await browser?.close();
    await canopy?.stop();
  });

  it('opens collapsed below the zone level, as a tree with levels, names and expanded state', async (t) => {
    if (skipUnlessBrowser(t)) return;
    const started = Date.now();
    await page.goto(`${canopy.adminUrl}/ui/?service=big`);
    await row(page, 'r3/r3-z2').waitFor();
    t.diagnostic(`first render (navigation to the tree drawn): ${Date.now() - started} ms`);
    assert.equal(await rows(page).count(), 1 + 10 + 50, 'root, regions and zones; subzones folded');
    assert.equal(await page.locator('ol.tree[role="tree"]').count(), 1);
    const zone = row(page, 'r3/r3-z2');
    assert.equal(await zone.getAttribute('role'), 'treeitem');
    assert.equal(await zone.getAttribute('aria-level'), '3');
    assert.equal(await zone.getAttribute('aria-expanded'), 'false');
    assert.match((await zone.getAttribute('aria-label')) ?? '', /^r3 \/ r3-z2: 200 of 200 healthy$/);
    assert.equal(await row(page, '').getAttribute('data-total'), '10000');
    const capped = page.locator('#capped');
    assert.ok(await capped.isVisible(), 'the capped endpoint lists are announced');
    assert.match((await capped.textContent()) ?? '', /10,000 endpoints: above 5,000/);
  });

  it('a node expands and collapses', async (t) => {
    if (skipUnlessBrowser(t)) return;
    await row(page, 'r3/r3-z2').locator('button.toggle').click();
    await row(page, 'r3/r3-z2/r3-z2-s7').waitFor();
    assert.equal(await row(page, 'r3/r3-z2').getAttribute('aria-expanded'), 'true');
    assert.equal(await rows(page).count(), 61 + 10);
    await row(page, 'r3').locator('button.toggle').click();
    await page.waitForFunction(`document.querySelectorAll('li.node').length === 61 + 10 - 5 - 10`);
  });

  it('search finds a locality and an address, opening only the branches that hold them', async (t) => {
    if (skipUnlessBrowser(t)) return;
    await page.fill('#search', 'r7-z4-s9');
    await page.waitForFunction(`document.querySelectorAll('li.node').length === 4`);
    assert.equal(await row(page, 'r7/r7-z4/r7-z4-s9').count(), 1);
    await page.fill('#search', '');
    await page.waitForFunction(`document.querySelectorAll('li.node').length > 4`);
  });

  it('a health flip shows on the page', async (t) => {
    if (skipUnlessBrowser(t)) return;
    const started = Date.now();
    const r = await canopy.admin('PATCH', '/api/v1/services/big/endpoints/10.5.0.1%3A80', { health: 'unhealthy' });
    assert.equal(r.status, 200);
    await page.waitForFunction(
      `document.querySelector('li.node[data-path="r5"]')?.getAttribute('data-healthy') === '999'`,
      undefined,
      { timeout: 10_000 },
    );
    t.diagnostic(`update after a flip (PATCH to the count on the page, 1 s poll): ${Date.now() - started} ms`);
    const longest = Number(await page.evaluate('window.longest'));
    t.diagnostic(`longest main-thread task so far: ${Math.round(longest)} ms`);
  });

  it('a short list: addresses in numeric order, "+N more" opens the rest', async (t) => {
    if (skipUnlessBrowser(t)) return;
    await page.goto(`${canopy.adminUrl}/ui/?service=small`);
    const chips = page.locator('li.node[data-path="a/a1/x"] .endpoint');
    await chips.first().waitFor();
    assert.deepEqual((await chips.allTextContents()).slice(0, 3), ['10.200.0.1:80', '10.200.0.2:80', '10.200.0.3:80']);
    const more = page.locator('li.node[data-path="a/a1/x"] button.more');
    assert.equal(await more.textContent(), '+18 more');
    await more.click();
    await page.waitForFunction(`document.querySelectorAll('li.node[data-path="a/a1/x"] .endpoint').length === 30`);
    assert.equal(await chips.last().textContent(), '10.200.0.30:80');
  });

  it('on a phone, the explanation opens right under the tapped node', async (t) => {
    if (skipUnlessBrowser(t)) return;
    const phone = await browser!.newPage({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
    try {
      await phone.goto(`${canopy.adminUrl}/ui/?service=big`);
      const zone = row(phone, 'r9/r9-z4');
      await zone.locator('button.name').tap();
      const inline = phone.locator('li.explain-inline #explain h3');
      await inline.waitFor({ timeout: 10_000 });
      assert.match((await inline.textContent()) ?? '', /A client at r9 \/ r9-z4/);
      // Both boxes read in one frame: the 1 s poll re-renders the tree, so two separate reads (or a locator's
      // box) can fall either side of a re-render and find a detached row. The page reports what it measured.
      const measure = `(() => {
        const row = document.querySelector('li.node[data-path="r9/r9-z4"]');
        const ex = document.querySelector('li.explain-inline');
        if (!row || !ex) return { row: !!row, explain: !!ex };
        const a = row.getBoundingClientRect();
        const b = ex.getBoundingClientRect();
        return { row: true, explain: true, top: b.top, bottom: a.bottom, under: b.top >= a.bottom - 1 && b.top < a.bottom + 40 };
      })()`;
      const placed = await phone.waitForFunction(`${measure}.under === true`, undefined, { timeout: 10_000 }).then(
        () => true,
        () => false,
      );
      assert.ok(placed, `under the node: ${JSON.stringify(await phone.evaluate(measure))}`);
    } finally {
      await phone.close();
    }
  });

  it('text keeps a contrast of at least 4.5:1, dimmed (unrouted) rows too', async (t) => {
    if (skipUnlessBrowser(t)) return;
    await page.goto(`${canopy.adminUrl}/ui/?service=strict`);
    await row(page, 'a/a1/x').locator('button.name').click();
    await page.locator('li.node.unrouted').first().waitFor({ timeout: 10_000 });
    assert.deepEqual(await page.evaluate(CONTRAST_CHECK), []);
  });

  it('when the server goes away, a banner at the top says the data is stale and the data greys', async (t) => {
    if (skipUnlessBrowser(t)) return;
    await canopy.stop();
    const banner = page.locator('#stale');
    await banner.waitFor({ state: 'visible', timeout: 10_000 });
    assert.equal(await banner.getAttribute('role'), 'alert');
    assert.match((await banner.textContent()) ?? '', /Not updating since .*out of date/);
    assert.equal(await page.evaluate(`document.body.classList.contains('stale')`), true);
    const top = await banner.boundingBox();
    assert.ok(top && top.y < 5, 'the banner is at the top of the page');
  });
});

describe('the web view with an admin token', () => {
  it('opens the token prompt when the server answers 401', async (t) => {
    if (skipUnlessBrowser(t)) return;
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-ui-token-'));
    const tokenFile = path.join(dir, 'token');
    writeFileSync(tokenFile, 'a-token-of-enough-length\n');
    const canopy = await startCanopyProcess({ services: [smallService()] }, ['--admin-token-file', tokenFile]);
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    try {
      const page = await browser.newPage();
      await page.goto(`${canopy.adminUrl}/ui/`);
      await page.waitForFunction(`document.getElementById('token-box')?.open === true`, undefined, {
        timeout: 10_000,
      });
      assert.equal(await page.evaluate('document.activeElement?.id'), 'token');
      await page.fill('#token', 'a-token-of-enough-length');
      await page.press('#token', 'Enter');
      await page.locator('li.node[data-path="a/a1/x"]').waitFor({ timeout: 10_000 });
    } finally {
      await browser.close();
      await canopy.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
