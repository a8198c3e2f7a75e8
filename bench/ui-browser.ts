/**
 * `npm run bench:ui -- --browser` (or `node dist/bench/ui-browser.js`): the web view in headless
 * Chromium at 500 localities and 10,000 endpoints, served by a real `canopy serve`:
 *   - first render: the page's first draw of the tree (performance.measure around render());
 *   - update after a flip: the render that follows an endpoint's health change;
 *   - longest task: the longest main-thread task the browser reports over the run.
 * Baseline: the same page with every node open (`?open=all`), as the page drew before big trees
 * opened collapsed. Each pair runs interleaved in fresh pages; 5 pairs, medians with min–max.
 * Benchmarks measure; they never fail.
 */
import { existsSync } from 'node:fs';
import { chromium, type Page } from 'playwright-core';
import { startCanopyProcess } from '../e2e/support/canopy-process.js';
import { BIG_ROWS, bigService } from '../e2e/support/ui-mesh.js';
import { median } from './data.js';

const CHROMIUM = '/usr/bin/chromium';
const PAIRS = 5;
const FLIP_TIMEOUT_MS = 10_000;

interface Run {
  readonly first: number;
  readonly update: number;
  readonly longest: number;
}

async function measure(page: Page, url: string, rows: number, flip: () => Promise<void>, region: string): Promise<Run> {
  await page.addInitScript(`
    window.longest = 0;
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.longest = Math.max(window.longest, e.duration);
    }).observe({ type: 'longtask', buffered: true });
  `);
  await page.goto(url);
  await page.waitForFunction(`document.querySelectorAll('#tree li.node').length === ${rows}`, undefined, {
    timeout: 30_000,
  });
  const renders = async () =>
    (await page.evaluate(`performance.getEntriesByName('canopy-render').map((e) => e.duration)`)) as number[];
  const first = (await renders())[0] ?? NaN;
  const before = Number(
    await page.evaluate(`document.querySelector('li.node[data-path="${region}"]').dataset.healthy`),
  );
  const count = (await renders()).length;
  await flip();
  await page.waitForFunction(
    `Number(document.querySelector('li.node[data-path="${region}"]').dataset.healthy) !== ${before}`,
    undefined,
    { timeout: FLIP_TIMEOUT_MS },
  );
  const update = (await renders())[count] ?? NaN;
  const longest = Number(await page.evaluate('window.longest'));
  return { first, update, longest };
}

/** Two significant figures, without exponents: 0.73, 7.6, 55, 260. */
function twoFigures(x: number): string {
  return x >= 10 ? String(Number(x.toPrecision(2))) : x.toPrecision(2);
}

function summary(label: string, xs: readonly number[]): string {
  const fmt = twoFigures;
  return `${label} ${fmt(median(xs))} ms (${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))})`;
}

async function main(): Promise<void> {
  if (!existsSync(CHROMIUM)) {
    process.stdout.write(`bench:ui browser: skipped, ${CHROMIUM} is missing (apt-get install chromium)\n`);
    return;
  }
  const canopy = await startCanopyProcess({ server: { debounceMs: 20 }, services: [bigService()] });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu'],
  });
  let healthy = true;
  const flip = async () => {
    healthy = !healthy;
    const r = await canopy.admin('PATCH', '/api/v1/services/big/endpoints/10.5.0.1%3A80', {
      health: healthy ? 'healthy' : 'unhealthy',
    });
    if (r.status !== 200) throw new Error(`PATCH answered ${r.status}`);
  };
  const runs: Record<'collapsed' | 'open', Run[]> = { collapsed: [], open: [] };
  try {
    for (let i = 0; i < PAIRS; i++) {
      // Interleaved, the order alternating, each in a fresh page.
      const order = i % 2 === 0 ? (['collapsed', 'open'] as const) : (['open', 'collapsed'] as const);
      for (const variant of order) {
        const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
        const url = `${canopy.adminUrl}/ui/?service=big${variant === 'open' ? '&open=all' : ''}`;
        runs[variant].push(await measure(page, url, BIG_ROWS[variant], flip, 'r5'));
        await page.close();
      }
    }
  } finally {
    await browser.close();
    await canopy.stop();
  }
  process.stdout.write(
    `web view in Chromium, 500 localities, 10,000 endpoints, ${PAIRS} interleaved pairs (median, min–max)\n`,
  );
  for (const key of ['first', 'update', 'longest'] as const) {
    const a = runs.collapsed.map((r) => r[key]);
    const b = runs.open.map((r) => r[key]);
    // A pair whose collapsed run had no long task at all (0 ms) has no ratio.
    const ratios = runs.open.flatMap((r, i) => (runs.collapsed[i]![key] > 0 ? [r[key] / runs.collapsed[i]![key]] : []));
    const name = { first: 'first render', update: 'update after a flip', longest: 'longest task' }[key];
    process.stdout.write(
      `  ${name.padEnd(20)} ${summary('collapsed', a)}   ${summary('all open (baseline)', b)}   ` +
        `baseline/collapsed ${twoFigures(median(ratios))}× (${twoFigures(Math.min(...ratios))}–${twoFigures(Math.max(...ratios))}, ${ratios.length} pairs)\n`,
    );
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench:ui browser: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
