/**
 * The web view's "Skipped input" panel in headless Chromium: `canopy serve`
 * opens a data directory in which an older version left a service with an
 * endpoint on port 70000 (the store checks nothing); the page lists that
 * endpoint with its field, value and why, while the rest of the service is
 * served, and hides the panel once an API write replaces the service.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { LevelJournal } from '../server/src/store/level/level-journal.js';
import { LocalStore } from '../server/src/store/level/local-store.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-sync'];
const missingBrowser = existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is missing (apt-get install chromium)`;

function skipUnlessBrowser(t: TestContext): boolean {
  if (!missingBrowser) return false;
  if (process.env['CI'] === 'true') assert.fail(`the web view test must run in CI: ${missingBrowser}`);
  t.skip(missingBrowser);
  return true;
}

const endpoint = (address: string, port: number) => ({
  address,
  port,
  locality: { region: 'r1', zone: 'z1', subzone: '' },
  network: '',
  node: '',
  cluster: '',
  labels: {},
  health: 'healthy' as const,
  weight: 1,
});
const legacy = (endpoints: ReturnType<typeof endpoint>[]) => ({
  name: 'legacy',
  loadBalancing: {
    mode: 'failover' as const,
    routingPreference: ['region', 'zone', 'subzone'] as never,
    crossNetworkFailover: true,
    overprovisioningFactor: 140,
  },
  endpoints,
});

describe('the web view shows what is skipped, and why', () => {
  let canopy: CanopyProcess;
  let browser: Browser | undefined;
  let page: Page;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-ui-skipped-'));

  before(async () => {
    if (missingBrowser) return;
    const old = await LocalStore.open(await LevelJournal.open(path.join(dir, 'data')));
    await old.put(legacy([endpoint('10.0.0.1', 8080), endpoint('10.0.0.2', 70000)]), { owner: 'api' });
    await old.close();
    canopy = await startCanopyProcess({ services: [] }, ['--data-dir', path.join(dir, 'data')]);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  });
  after(async () => {
    await browser?.close();
    await canopy?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists the endpoint left out with its field, value and reason; the rest is served', async (t) => {
    if (skipUnlessBrowser(t)) return;
    const served = (await canopy.admin('GET', '/api/v1/services/legacy')).body as { endpoints: { port: number }[] };
    assert.deepEqual(
      served.endpoints.map((e) => e.port),
      [8080],
    );
    await page.goto(`${canopy.adminUrl}/ui/`);
    const row = page.locator('#skipped-panel:not([hidden]) tr.skip');
    await row.first().waitFor({ timeout: 10_000 });
    assert.equal(await row.count(), 1);
    const cells = await row.locator('td').allInnerTexts();
    assert.equal(cells[0], 'service legacy, endpoint 10.0.0.2:70000');
    assert.equal(cells[1], 'port');
    assert.equal(cells[2], '70000');
    assert.match(cells[3]!, /1 endpoint\(s\) of legacy\s+must be an integer from 1 to 65535, got number 70000/);
  });

  it('hides the panel once the service is written clean', async (t) => {
    if (skipUnlessBrowser(t)) return;
    const put = await canopy.admin('PUT', '/api/v1/services/legacy', {
      name: 'legacy',
      endpoints: [{ address: '10.0.0.1', port: 8080 }],
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    await page.locator('#skipped-panel[hidden]').waitFor({ state: 'attached', timeout: 15_000 });
    assert.deepEqual((await canopy.admin('GET', '/api/v1/skipped')).body, { skipped: [] });
  });
});
