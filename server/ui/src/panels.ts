/** The side panels: connected clients with their sync state, and the explained client's shares. */
import type { Explain, ServiceView, ViewClient } from './api.js';
import { h, percent } from './dom.js';
import { renderLoadWhy } from './load.js';

export function renderClients(
  view: ServiceView,
  selected: number | undefined,
  onSelect: (c: ViewClient) => void,
): HTMLElement {
  if (view.clients.length === 0) {
    return h('p', { class: 'empty' }, `No client or node agent is subscribed to ${view.service}.`);
  }
  const rows = view.clients.map((c) => {
    const at = [c.placement.locality.region, c.placement.locality.zone, c.placement.locality.subzone].join('/');
    const tr = h(
      'tr',
      {
        class: ['client', `sync-${c.sync}`, selected === c.streamId && 'selected'].filter(Boolean).join(' '),
        'data-stream': c.streamId,
        'data-sync': c.sync,
        tabindex: 0,
        title: `stream ${c.streamId} from ${c.peer}, connected ${c.connectedAt}`,
      },
      h(
        'td',
        {},
        h('span', { class: `kind ${c.kind}` }, c.kind === 'agent' ? 'agent' : 'client'),
        ' ',
        c.nodeId || '(no id)',
      ),
      h('td', {}, at === '//' ? '(no locality)' : at),
      h('td', { class: 'at-node' }, c.treeNode.length ? c.treeNode.join(' / ') : '(root)'),
      h(
        'td',
        {},
        h('span', { class: `sync ${c.sync}` }, c.sync === 'nacked' ? 'NACKed' : c.sync),
        c.nackDetail && h('div', { class: 'nack-detail' }, c.nackDetail),
      ),
    );
    tr.addEventListener('click', () => onSelect(c));
    tr.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' || e.key === ' ') onSelect(c);
    });
    return tr;
  });
  return h(
    'table',
    { class: 'clients' },
    h(
      'thead',
      {},
      h('tr', {}, h('th', {}, 'node id'), h('th', {}, 'locality'), h('th', {}, 'cached at'), h('th', {}, 'sync')),
    ),
    h('tbody', {}, ...rows),
  );
}

export function renderShares(explain: Explain): HTMLElement {
  const total = explain.localities.reduce((s, l) => s + l.share, 0);
  const rows = [...explain.localities]
    .sort((a, b) => a.priority - b.priority || b.share - a.share)
    .map((l) =>
      h(
        'tr',
        { class: `p${Math.min(l.priority, 4)}`, 'data-priority': l.priority },
        h('td', {}, h('span', { class: 'prio' }, `P${l.priority}`)),
        h('td', {}, [l.locality.region, l.locality.zone, l.locality.subzone].join('/')),
        h('td', { class: 'num' }, String(l.healthyEndpoints)),
        h('td', { class: 'num' }, String(l.weight)),
        h('td', { class: 'num share' }, percent(total > 0 ? l.share / total : 0)),
      ),
    );
  const client = explain.client;
  const where = [client.locality.region, client.locality.zone, client.locality.subzone].join('/');
  return h(
    'div',
    {},
    renderLoadWhy(explain),
    h(
      'p',
      { class: 'explain-summary' },
      `A client at ${where === '//' ? '(no locality)' : where}`,
      client.network && ` on network ${client.network}`,
      ` matches ${explain.treeNode.length ? explain.treeNode.join(' / ') : 'the root'}; `,
      `CLA cache key ${explain.cacheKey}, overprovisioning ${explain.overprovisioningFactor}%`,
      explain.reach ? `, reach ${explain.reach.minEndpoints} endpoints.` : '.',
    ),
    explain.localities.length === 0
      ? h('p', { class: 'empty' }, 'It would be sent no endpoint.')
      : h(
          'table',
          { class: 'shares' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', {}, 'tier'),
              h('th', {}, 'locality'),
              h('th', { class: 'num' }, 'healthy'),
              h('th', { class: 'num' }, 'weight'),
              h('th', { class: 'num' }, 'share'),
            ),
          ),
          h('tbody', {}, ...rows),
        ),
  );
}
