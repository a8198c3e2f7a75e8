/**
 * The load panel of a load-aware service: per locality the load clients
 * report landing there and the load the last interval assigned it against its
 * capacity; per client tree node its offered load, its spill and where its
 * load goes. The explained client's "why" sentences come with its tiers.
 */
import type { Explain, LoadPanel } from './api.js';
import { h, percent, s } from './dom.js';

const rps = (x: number) => (x >= 10 || x === 0 ? String(Math.round(x)) : x.toFixed(1));

export function renderLoad(load: LoadPanel, service: string): HTMLElement {
  const more = (shown: number, total: number, what: string) =>
    total > shown &&
    h('p', { class: 'capped' }, `${total - shown} more ${what} (the busiest are shown): /debug/load/${service}`);
  const localities = load.localities.map((l) => {
    const full = l.capacityRps > 0 && l.assignedRps >= l.capacityRps * 0.999;
    const state = l.drained ? 'drained' : full ? 'full' : 'room';
    return h(
      'tr',
      { class: `load-locality ${state}`, 'data-locality': l.path, 'data-state': state },
      h('td', {}, l.path),
      h('td', { class: 'num' }, rps(l.reportedRps)),
      h('td', { class: 'num' }, meter(l.assignedRps, l.capacityRps), ` ${rps(l.assignedRps)} / ${rps(l.capacityRps)}`),
      h(
        'td',
        { class: `load-state ${state}` },
        l.drained ? `drained (${l.healthy} of ${l.endpoints} healthy)` : full ? 'full' : '',
      ),
    );
  });
  const nodes = load.clientNodes.map((n) =>
    h(
      'tr',
      { class: 'load-node', 'data-node': n.path, 'data-spill': n.spill.toFixed(3) },
      h('td', {}, n.path || '(root)'),
      h('td', { class: 'num' }, rps(n.offeredRps)),
      h('td', { class: 'num' }, percent(n.spill)),
      h('td', {}, n.shares.map(([l, share]) => `${l} ${percent(share)}`).join(', ')),
    ),
  );
  const replicas = load.replicas && load.replicas.length > 1 ? ` · planned from ${load.replicas.length} replicas` : '';
  return h(
    'div',
    {},
    h(
      'p',
      { class: 'explain-summary', id: 'load-summary' },
      `${load.balancing}: clients offer ${rps(load.offeredRps)} rps against ${rps(load.capacityRps)} rps of capacity; ` +
        `${percent(load.spillFraction)} of it spills past the clients' nearest localities${replicas}.`,
    ),
    h(
      'table',
      { class: 'load-localities' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', {}, 'locality'),
          h('th', { class: 'num' }, 'reported rps'),
          h('th', { class: 'num' }, 'assigned / capacity'),
          h('th', {}, ''),
        ),
      ),
      h('tbody', {}, ...localities),
    ),
    more(load.localities.length, load.localitiesTotal, 'localities'),
    load.clientNodes.length === 0
      ? h('p', { class: 'empty' }, 'No client has reported load yet: every client node gets its plain failover CLA.')
      : h(
          'table',
          { class: 'load-nodes' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', {}, 'client node'),
              h('th', { class: 'num' }, 'offered rps'),
              h('th', { class: 'num' }, 'spill'),
              h('th', {}, 'its load goes to'),
            ),
          ),
          h('tbody', {}, ...nodes),
        ),
    more(load.clientNodes.length, load.clientNodesTotal, 'client nodes'),
  );
}

/** The explained client's load: why its load goes where it goes. */
export function renderLoadWhy(explain: Explain): HTMLElement | undefined {
  const load = explain.load;
  if (!load) return undefined;
  return h(
    'div',
    { class: 'load-why' },
    h('h4', {}, `Load (${load.balancing}), client node ${load.clientNode || '(root)'}`),
    h('ul', { class: 'load-summary' }, ...load.summary.map((line) => h('li', {}, line))),
    h('ul', { class: 'load-reasons' }, ...load.localities.map((l) => h('li', { 'data-locality': l.locality }, l.why))),
  );
}

function meter(value: number, capacity: number): SVGElement {
  const width = 60;
  const filled = capacity > 0 ? Math.round(Math.min(1, value / capacity) * width) : 0;
  return s(
    'svg',
    { class: 'meter', width, height: 8, role: 'img', 'aria-label': `${rps(value)} of ${rps(capacity)} rps` },
    s('rect', { class: 'meter-back', x: 0, y: 0, width, height: 8, rx: 2 }),
    filled > 0 && s('rect', { class: 'meter-fill', x: 0, y: 0, width: filled, height: 8, rx: 2 }),
  );
}
