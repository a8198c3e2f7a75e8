/**
 * The web view in a real browser: `canopy serve` with the example mesh,
 * raw ADS clients (one ACKs, one NACKs, one never answers, one node agent)
 * and Debian's Chromium driven by playwright-core.
 *
 * Screenshots for the README: CANOPY_UI_SCREENSHOTS=docs node --test dist/e2e/ui.test.js
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { load as parse } from 'js-yaml';
import { ENDPOINT_TYPE, TREE_TYPE } from '../server/src/resources/type-urls.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { RawAdsStream, type RawResponse } from './support/raw-ads.js';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const EXAMPLE = fileURLToPath(new URL('../../server/examples/mesh.yaml', import.meta.url));
const SCREENSHOTS = process.env['CANOPY_UI_SCREENSHOTS'];
const missingBrowser = existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is missing (apt-get install chromium)`;

/** The rows of the tree, by the path the page gives them. */
const node = (page: Page, p: string) => page.locator(`li.node[data-path="${p}"]`);

async function attr(page: Page, p: string, name: string): Promise<string | null> {
  return node(page, p).getAttribute(`data-${name}`);
}

/** Waits until a node's data attribute has a value (the page polls once a second). */
async function until(page: Page, p: string, name: string, want: string | null): Promise<void> {
  const deadline = Date.now() + 10_000;
  let got: string | null = null;
  while (Date.now() < deadline) {
    got = (await node(page, p).count()) > 0 ? await attr(page, p, name) : '(no node)';
    if (got === want) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`node ${p}: data-${name} is ${got}, want ${want}`);
}

function skipUnlessBrowser(t: TestContext): boolean {
  if (!missingBrowser) return false;
  if (process.env['CI'] === 'true') assert.fail(`the web view test must run in CI: ${missingBrowser}`);
  t.skip(missingBrowser);
  return true;
}

describe('the web view (/ui/) in headless Chromium', () => {
  let canopy: CanopyProcess;
  let browser: Browser | undefined;
  let page: Page;
  const streams: RawAdsStream[] = [];
  let closing = false;

  /** A raw ADS client subscribed to the example's CLA (or tree) from a locality. */
  async function connect(id: string, locality: string, reply: 'ack' | 'nack' | 'none', typeUrl = ENDPOINT_TYPE) {
    const [region = '', zone = '', sub_zone = ''] = locality.split('/');
    const s = new RawAdsStream(canopy.xdsUri);
    streams.push(s);
    const nodeInfo = { id, cluster: 'ui-test', locality: { region, zone, sub_zone } };
    s.send({ type_url: typeUrl, node: nodeInfo, resource_names: ['echo'] });
    const answer = (r: RawResponse) => {
      if (reply === 'ack')
        s.send({ type_url: typeUrl, version_info: r.version_info, response_nonce: r.nonce, resource_names: ['echo'] });
      if (reply === 'nack') {
        s.send({
          type_url: typeUrl,
          response_nonce: r.nonce,
          resource_names: ['echo'],
          error_detail: { code: 3, message: 'ui-test: endpoint 127.0.0.15 rejected' },
        });
      }
    };
    answer(await s.next(5000));
    // Later pushes (a health change) are answered the same way, until the suite closes the streams.
    void (async () => {
      while (!closing) {
        const r = await s.maybeNext(500);
        if (r && !closing) answer(r);
      }
    })();
  }

  before(async () => {
    if (missingBrowser) return;
    const config = parse(readFileSync(EXAMPLE, 'utf8')) as { services: object[] };
    canopy = await startCanopyProcess({ server: { debounceMs: 20 }, services: config.services });
    await connect('ui-east-a', 'us-east/us-east-1a/rack1', 'ack');
    await connect('ui-east-b', 'us-east/us-east-1a/rack2', 'none');
    await connect('ui-west', 'eu-west/eu-west-1b/rack1', 'nack');
    await connect('ui-agent', 'ap-south/ap-south-1a/rack1', 'ack', TREE_TYPE);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  });
  after(async () => {
    closing = true;
    await browser?.close();
    for (const s of streams) s.close();
    await canopy?.stop();
  });

  it('the admin root redirects to the page, which draws the tree with its counts', async (t) => {
    if (skipUnlessBrowser(t)) return;
    await page.goto(`${canopy.adminUrl}/`);
    assert.equal(new URL(page.url()).pathname, '/ui/');
    await node(page, 'us-east/us-east-1a/rack1').waitFor();
    // The example: 3 regions, 5 zones, 6 subzones, and the root.
    assert.equal(await page.locator('li.node').count(), 15);
    assert.equal(await attr(page, '', 'total'), '6');
    assert.equal(await attr(page, '', 'healthy'), '6');
    assert.equal(await attr(page, 'us-east', 'total'), '3');
    assert.equal(await attr(page, 'us-east/us-east-1a', 'total'), '2');
    assert.equal(await attr(page, 'ap-south', 'weight'), '2');
    assert.match(await node(page, 'us-east').locator('.counts').innerText(), /3\/3 healthy/);
    assert.equal(await page.locator('#service').inputValue(), 'echo');
    for (const href of ['/metrics', '/debug/clients'])
      assert.equal(await page.locator(`header a[href="${href}"]`).count(), 1);
    assert.match((await page.locator('#link-cla').getAttribute('href')) ?? '', /^\/debug\/cla\?service=echo/);
    assert.match((await page.locator('#link-explain').getAttribute('href')) ?? '', /^\/debug\/explain\?service=echo/);
  });

  it('places clients and node agents on the node their CLA is cached under, with their sync state', async (t) => {
    if (skipUnlessBrowser(t)) return;
    await until(page, 'us-east/us-east-1a/rack1', 'clients', '1');
    await until(page, 'us-east/us-east-1a/rack2', 'clients', '1');
    await until(page, 'eu-west/eu-west-1b/rack1', 'clients', '1');
    await until(page, 'ap-south/ap-south-1a/rack1', 'agents', '1');
    assert.equal(await attr(page, 'us-east/us-east-1b/rack1', 'clients'), '0');
    const row = (id: string) => page.locator('tr.client', { hasText: id });
    await row('ui-east-a').and(page.locator('[data-sync="acked"]')).waitFor();
    assert.equal(await row('ui-east-b').getAttribute('data-sync'), 'pending');
    assert.equal(await row('ui-west').getAttribute('data-sync'), 'nacked');
    assert.match(await row('ui-west').innerText(), /ui-test: endpoint 127\.0\.0\.15 rejected/);
    assert.match(await row('ui-agent').innerText(), /agent/);
  });

  it('shows a health change made through the admin API without a reload', async (t) => {
    if (skipUnlessBrowser(t)) return;
    const r = await canopy.admin('PATCH', `/api/v1/services/echo/endpoints/${encodeURIComponent('127.0.0.11:50051')}`, {
      health: 'unhealthy',
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    await until(page, 'us-east/us-east-1a/rack1', 'healthy', '0');
    assert.equal(await attr(page, 'us-east/us-east-1a/rack1', 'total'), '1');
    assert.equal(await attr(page, 'us-east', 'healthy'), '2');
    assert.equal(await attr(page, '', 'healthy'), '5');
    assert.match(await node(page, 'us-east/us-east-1a/rack1').locator('.counts').innerText(), /0\/1 healthy/);
    // The rack has nothing routable left: its client's CLA is now cached under the zone.
    await until(page, 'us-east/us-east-1a', 'clients', '1');
    assert.equal(await attr(page, 'us-east/us-east-1a/rack1', 'clients'), '0');
  });

  it("selecting a client highlights its priority tiers and shows each locality's share", async (t) => {
    if (skipUnlessBrowser(t)) return;
    const probe = await canopy.admin('GET', '/debug/explain?service=echo&region=us-east');
    if (probe.status === 404) {
      t.skip(`/debug/explain is not served by this build (${JSON.stringify(probe.body)})`);
      return;
    }
    await page.locator('tr.client', { hasText: 'ui-east-a' }).click();
    // us-east-1a/rack1 is down: the client matches its zone; rack2 is P0, the zone's sibling P1, other regions P2.
    await until(page, 'us-east/us-east-1a', 'matched', '');
    await until(page, 'us-east/us-east-1a/rack2', 'tier', '0');
    assert.equal(await attr(page, 'us-east/us-east-1a/rack1', 'tier'), null);
    assert.equal(await attr(page, 'us-east/us-east-1b/rack1', 'tier'), '1');
    assert.equal(await attr(page, 'eu-west/eu-west-1a/rack1', 'tier'), '2');
    assert.equal(await attr(page, 'ap-south', 'tier'), '2');
    const p0 = page.locator('table.shares tr[data-priority="0"]');
    assert.equal(await p0.count(), 1);
    assert.match(await p0.innerText(), /us-east\/us-east-1a\/rack2/);
    await shoot(page, 'ui.png');

    // A typed locality: the eu-west-1a rack becomes P0.
    await page.locator('#locality').fill('eu-west/eu-west-1a/rack1');
    await page.locator('#locality-form button[type=submit]').click();
    await until(page, 'eu-west/eu-west-1a/rack1', 'tier', '0');
    await until(page, 'eu-west/eu-west-1a/rack1', 'matched', '');
    assert.equal(await attr(page, 'eu-west/eu-west-1b/rack1', 'tier'), '1');
    assert.equal(await attr(page, 'us-east/us-east-1a/rack2', 'tier'), '2');
  });

  it('sends an entered admin token as a Bearer header on its requests', async (t) => {
    if (skipUnlessBrowser(t)) return;
    const sent = page.waitForRequest(
      (r) => r.url().includes('/ui/api/') && r.headers()['authorization'] === 'Bearer ui-test-token',
      { timeout: 10_000 },
    );
    await page.locator('.token summary').click();
    await page.locator('#token').fill('ui-test-token');
    await page.locator('#token').press('Enter');
    await sent;
    assert.equal(await page.evaluate("sessionStorage.getItem('canopy.adminToken')"), 'ui-test-token');
    await page.locator('#token').fill('');
    await page.locator('#token').press('Enter');
    await page.locator('.token summary').click();
  });

  it('picks up a service created through the API, and falls back when the one shown is deleted', async (t) => {
    if (skipUnlessBrowser(t)) return;
    const put = await canopy.admin('PUT', '/api/v1/services/aardvark', {
      loadBalancing: { mode: 'failover', routingPreference: ['zone'] },
      endpoints: [{ address: '127.0.0.21', port: 50051, locality: { region: 'r', zone: 'zz' } }],
    });
    assert.equal(put.status, 201, JSON.stringify(put.body));
    await page.locator('#service option[value="aardvark"]').waitFor({ state: 'attached', timeout: 15_000 });
    await page.locator('#service').selectOption('aardvark');
    await until(page, 'zz', 'total', '1');
    assert.equal(await page.locator('li.node').count(), 2);
    assert.equal(new URL(page.url()).searchParams.get('service'), 'aardvark');
    assert.equal((await canopy.admin('DELETE', '/api/v1/services/aardvark')).status, 204);
    await node(page, 'us-east').waitFor({ timeout: 15_000 });
    assert.equal(await page.locator('#service').inputValue(), 'echo');
  });

  it('is readable at phone width: nothing overflows the viewport sideways', async (t) => {
    if (skipUnlessBrowser(t)) return;
    await page.setViewportSize({ width: 390, height: 844 });
    await node(page, 'us-east/us-east-1a/rack1').waitFor();
    const explained = (await canopy.admin('GET', '/debug/explain?service=echo')).status === 200;
    if (explained) {
      // The typed locality again: tiers and shares must fit as well.
      await page.locator('#locality').fill('eu-west/eu-west-1a/rack1');
      await page.locator('#locality-form button[type=submit]').click();
      await until(page, 'eu-west/eu-west-1a/rack1', 'tier', '0');
      await page.locator('table.shares').waitFor();
    }
    const width = await page.evaluate('document.documentElement.scrollWidth');
    assert.ok(Number(width) <= 390, `the page is ${String(width)} px wide at a 390 px viewport`);
    await shoot(page, 'ui-phone.png', true);
  });
});

async function shoot(page: Page, name: string, fullPage = false): Promise<void> {
  if (!SCREENSHOTS) return;
  await page.screenshot({ path: path.join(SCREENSHOTS, name), fullPage });
}
