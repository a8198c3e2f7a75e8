/**
 * The web view of a load-aware service in a real browser (Debian's Chromium
 * through playwright-core): `canopy serve`, real backends, and a real
 * @grpc/grpc-js-xds client in zone A offering twice zone A's capacity and
 * reporting it over LRS. The load panel shows zone A full and the client
 * node's spill; explaining a client there says why; a service that is not
 * load-aware has no load panel.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startBackend, type Backend } from '../server/src/demo/backend.js';
import { xdsBootstrap } from '../server/src/demo/bootstrap.js';
import { XdsEchoClient } from '../server/src/demo/xds-client.js';
import { parseLocality } from '../server/src/domain/locality.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { CONTRAST_CHECK } from './support/contrast.js';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
];
const missingBrowser = existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is missing (apt-get install chromium)`;
const INTERVAL_MS = 1000;
const BACKENDS: [id: string, host: string, locality: string][] = [
  ['a1', '127.0.33.1', 'r1/za/s'],
  ['a2', '127.0.33.2', 'r1/za/s'],
  ['b1', '127.0.33.3', 'r1/zb/s'],
  ['b2', '127.0.33.4', 'r1/zb/s'],
  ['c1', '127.0.33.5', 'r2/zc/s'],
  ['c2', '127.0.33.6', 'r2/zc/s'],
];

function skipUnlessBrowser(t: TestContext): boolean {
  if (!missingBrowser) return false;
  if (process.env['CI'] === 'true') assert.fail(`the web view test must run in CI: ${missingBrowser}`);
  t.skip(missingBrowser);
  return true;
}

describe('the web view of a load-aware service in headless Chromium', { timeout: 90_000 }, () => {
  const backends: Backend[] = [];
  let canopy: CanopyProcess;
  let client: XdsEchoClient | undefined;
  let timer: ReturnType<typeof setInterval> | undefined;
  let browser: Browser | undefined;
  let page: Page;

  before(async () => {
    if (missingBrowser) return;
    for (const [id, host, locality] of BACKENDS)
      backends.push(await startBackend({ id, host, locality: parseLocality(locality) }));
    const service = (name: string, loadAware?: object) => ({
      name,
      loadBalancing: {
        mode: 'failover',
        routingPreference: ['region', 'zone', 'subzone'],
        ...(loadAware ? { loadAware } : {}),
      },
      endpoints: backends.map((b, i) => ({
        address: b.address,
        port: b.port,
        locality: parseLocality(BACKENDS[i]![2]),
      })),
    });
    canopy = await startCanopyProcess({
      server: { debounceMs: 20, loadReportingIntervalMs: INTERVAL_MS },
      services: [service('echo', { balancing: 'waterfall', capacityRps: 30 }), service('plain')],
    });
    client = new XdsEchoClient({
      target: 'xds:///echo',
      bootstrap: xdsBootstrap({ serverUri: canopy.xdsUri, nodeId: 'ui-za', locality: parseLocality('r1/za/s') }),
    });
    // 120 rps (twice zone A's 60), in 50 ms ticks, bounded to the suite's length.
    const started = Date.now();
    timer = setInterval(() => {
      if (Date.now() - started > 80_000) return clearInterval(timer);
      for (let i = 0; i < 6; i++) client!.who(2000).catch(() => {});
    }, 50);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  });
  after(async () => {
    clearInterval(timer);
    client?.close();
    await browser?.close();
    await canopy?.stop();
    await Promise.all(backends.map((b) => b.stop()));
  });

  /** Waits (at most 20 intervals) until the locator's attribute satisfies `ok`. */
  const until = async (selector: string, name: string, ok: (v: string | null) => boolean) => {
    const end = Date.now() + 20 * INTERVAL_MS;
    let v: string | null = null;
    while (Date.now() < end) {
      const l = page.locator(selector);
      v = (await l.count()) > 0 ? await l.first().getAttribute(name) : '(none)';
      if (ok(v)) return v;
      await sleep(200);
    }
    assert.fail(`${selector} ${name}: ${v}`);
  };

  it('the load panel shows zone A full against its capacity and the client node spilling to zone B', async (t) => {
    if (skipUnlessBrowser(t)) return;
    await page.goto(`${canopy.adminUrl}/ui/?service=echo`);
    await page.locator('#load-panel:not([hidden])').waitFor();
    await until('tr.load-locality[data-locality="r1/za/s"]', 'data-state', (v) => v === 'full');
    await until('tr.load-node[data-node="r1/za/s"]', 'data-spill', (v) => Number(v) > 0.3);
    const za = await page.locator('tr.load-locality[data-locality="r1/za/s"]').innerText();
    assert.match(za, /r1\/za\/s\s+\d+\s+60 \/ 60\s+full/);
    const node = await page.locator('tr.load-node[data-node="r1/za/s"]').innerText();
    assert.match(node, /r1\/za\/s\s+\d+\s+\d+%\s+r1\/(za|zb)\/s \d+%, r1\/(za|zb)\/s \d+%/);
    assert.match(
      await page.locator('#load-summary').innerText(),
      /^waterfall: clients offer \d+ rps against 180 rps of capacity; \d+% of it spills/,
    );
    assert.equal(await page.locator('tr.load-locality[data-locality="r2/zc/s"]').getAttribute('data-state'), 'room');
  });

  it('explaining a client in zone A says why its load goes where it goes', async (t) => {
    if (skipUnlessBrowser(t)) return;
    // The steady state names zone B alone. A first report that overshoots (the client's catch-up burst) can
    // spill to zone C too for a few intervals while that spill drains back: explain again until it settles.
    const expected =
      /^r1\/za\/s full: \d+ of 60 rps; \d+% of this node's load goes to r1\/zb\/s, the nearest with room$/;
    const settle = Date.now() + 30_000;
    let text = '';
    while (Date.now() < settle) {
      await page.locator('#locality').fill('r1/za/s');
      await page.locator('#locality-form button[type=submit]').click();
      const summary = page.locator('#explain .load-summary li').first();
      await summary.waitFor();
      text = await summary.innerText();
      if (expected.test(text)) break;
      await sleep(1000);
    }
    assert.match(text, expected);
    assert.match(
      await page.locator('#explain .load-reasons li[data-locality="r2/zc/s"]').innerText(),
      /not needed while nearer localities have room/,
    );
    // Readable: every visible text of the page, the load panel and the explanation included, meets WCAG AA.
    assert.deepEqual(await page.evaluate(CONTRAST_CHECK), []);
  });

  it('a service that is not load-aware has no load panel', async (t) => {
    if (skipUnlessBrowser(t)) return;
    await page.locator('#service').selectOption('plain');
    await page.locator('#load-panel[hidden]').waitFor({ state: 'attached' });
    assert.equal(await page.locator('#load-panel').isHidden(), true);
  });
});
