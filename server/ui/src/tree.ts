/**
 * The locality tree as an indented list: one row per node, its links to its
 * parent drawn in an SVG gutter, so rows can wrap on a narrow screen while
 * the lines still join. Each row shows healthy/total endpoints, the healthy
 * weight, the clients and agents placed there and, when a client is being
 * explained, the node's priority tier and share of requests.
 */
import type { ServiceView, ViewNode } from './api.js';
import { h, percent, s } from './dom.js';
import { pathKey, type TierOverlay } from './tiers.js';

const STEP = 18;
const DOT_Y = 17;
const MAX_ENDPOINT_CHIPS = 12;

/** Clients and node agents placed at each node, by pathKey. */
export type Placed = ReadonlyMap<string, { readonly clients: number; readonly agents: number }>;

export function placedAt(view: ServiceView): Placed {
  const out = new Map<string, { clients: number; agents: number }>();
  for (const c of view.clients) {
    const key = pathKey(c.treeNode);
    const at = out.get(key) ?? { clients: 0, agents: 0 };
    at[c.kind === 'agent' ? 'agents' : 'clients']++;
    out.set(key, at);
  }
  return out;
}

export interface TreeHandlers {
  /** A node's name was clicked: explain a client placed at that node. */
  readonly onPick: (path: readonly string[]) => void;
  /** Whether a node's children are hidden (by pathKey and depth). */
  readonly isCollapsed?: (key: string, depth: number) => boolean;
  /** The expand/collapse toggle of a node was pressed. */
  readonly onToggle?: (key: string) => void;
  /** Text to find in a node's locality path or an endpoint's address; matches and their ancestors show. */
  readonly search?: string;
  /** Leaves whose endpoint list is opened past the first few. */
  readonly allChips?: ReadonlySet<string>;
  readonly onMore?: (key: string) => void;
  /** 'problems' (default): siblings with unhealthy, draining or terminating endpoints first; 'name': as served. */
  readonly order?: TreeOrder;
}

export type TreeOrder = 'problems' | 'name';

/**
 * A tree with more nodes than this, or more endpoints (each leaf lists its own), opens collapsed below
 * the zone level: 300 endpoints in 30 subzones drawn open were 2,600 px tall on a desktop.
 */
const OPEN_NODES = 60;
const OPEN_ENDPOINTS = 100;
export const COLLAPSED_DEPTH = 2;

export function opensCollapsed(view: ServiceView): boolean {
  const nodes = (n: ViewNode): number => n.children.reduce((sum, c) => sum + nodes(c), 1);
  return view.root.total > OPEN_ENDPOINTS || nodes(view.root) > OPEN_NODES;
}

/** Siblings by the share of their endpoints that are not healthy, most first; ties keep the server's order. */
function problemsFirst(nodes: readonly ViewNode[]): ViewNode[] {
  const down = (n: ViewNode) => (n.total === 0 ? 0 : (n.total - n.healthy) / n.total);
  return [...nodes].sort((a, b) => down(b) - down(a));
}

/** Whether `n` or anything below it matches the search (a locality value or an endpoint address). */
function matches(n: ViewNode, q: string): boolean {
  if (n.path.some((v) => v.toLowerCase().includes(q))) return true;
  if (n.endpoints?.some((e) => e.key.includes(q))) return true;
  return n.children.some((c) => matches(c, q));
}

export function renderTree(
  view: ServiceView,
  overlay: TierOverlay | undefined,
  selectedNode: string | undefined,
  handlers: TreeHandlers,
): HTMLElement {
  const placed = placedAt(view);
  const list = h('ol', { class: 'tree', role: 'tree', 'aria-label': `locality tree of ${view.service}` });
  const q = handlers.search?.trim().toLowerCase() ?? '';
  // continues[c]: whether the ancestor at depth c+1 has a later sibling, so its elbow's column c goes on down.
  const walk = (n: ViewNode, continues: boolean[], last: boolean) => {
    const key = pathKey(n.path);
    // A search opens every branch that holds a match and hides the rest.
    const collapsed = q ? false : (handlers.isCollapsed?.(key, n.path.length) ?? false);
    list.append(row(view, n, placed, continues, last, overlay, selectedNode, handlers, collapsed));
    if (collapsed) return;
    const matching = q ? n.children.filter((c) => matches(c, q)) : n.children;
    const shown = handlers.order === 'name' ? matching : problemsFirst(matching);
    // The root draws no elbow, so it adds no column.
    const below = n.path.length > 0 ? [...continues, !last] : [];
    shown.forEach((c, i) => walk(c, below, i === shown.length - 1));
  };
  walk(view.root, [], true);
  return list;
}

function row(
  view: ServiceView,
  n: ViewNode,
  placed: Placed,
  continues: readonly boolean[],
  last: boolean,
  overlay: TierOverlay | undefined,
  selectedNode: string | undefined,
  handlers: TreeHandlers,
  collapsed: boolean,
): HTMLElement {
  const depth = n.path.length;
  const key = pathKey(n.path);
  const tier = overlay?.byPath.get(key);
  const { clients, agents } = placed.get(key) ?? { clients: 0, agents: 0 };
  const matched = overlay?.matched === key;
  // No healthy endpoint: winding down only (draining, terminating) is told from failed (unhealthy).
  const draining = n.draining;
  const health =
    n.total === 0
      ? 'none'
      : n.healthy === n.total
        ? 'all'
        : n.healthy > 0
          ? 'some'
          : draining === n.total
            ? 'draining'
            : 'none';
  const tierClass = tier?.priority !== undefined ? `p${Math.min(tier.priority, 4)}` : overlay ? 'unrouted' : '';
  const scope = depth === 0 ? 'service' : (view.scopes[depth - 1] ?? '');
  const name = depth === 0 ? view.service : n.value || '(none)';

  const li = h(
    'li',
    {
      class: ['node', `health-${health}`, tierClass, matched && 'matched', selectedNode === key && 'selected']
        .filter(Boolean)
        .join(' '),
      'data-path': key,
      'data-healthy': n.healthy,
      'data-total': n.total,
      'data-weight': n.weight,
      'data-clients': clients,
      'data-agents': agents,
      'data-tier': tier?.priority,
      'data-matched': matched,
      style: `padding-left:${(depth + 1) * STEP + 6}px`,
      role: 'treeitem',
      'aria-level': depth + 1,
      'aria-expanded': n.children.length > 0 ? String(!collapsed) : undefined,
      // The name says where the node is, not just its last value.
      'aria-label': `${depth === 0 ? view.service : n.path.join(' / ')}: ${n.healthy} of ${n.total} healthy`,
    },
    gutter(depth, continues, last, n.children.length > 0 && !collapsed),
    h(
      'div',
      { class: 'body' },
      n.children.length > 0 &&
        h(
          'button',
          {
            type: 'button',
            class: 'toggle',
            'aria-label': `${collapsed ? 'expand' : 'collapse'} ${name}`,
            title: collapsed ? `show the ${n.children.length} nodes under ${name}` : `hide what is under ${name}`,
          },
          collapsed ? '▸' : '▾',
        ),
      h(
        'button',
        { type: 'button', class: 'name', title: `explain a client placed at ${name}` },
        h('span', { class: 'scope' }, scope),
        ' ',
        h('strong', {}, name),
      ),
      h(
        'div',
        { class: 'stats' },
        healthBar(n.healthy, draining, n.total),
        h(
          'span',
          { class: 'counts' },
          `${n.healthy}/${n.total} healthy${draining > 0 ? `, ${draining} draining` : ''}`,
        ),
        h('span', { class: 'weight', title: 'sum of healthy endpoint weights' }, `w ${n.weight}`),
        clients > 0 && h('span', { class: 'badge clients' }, `${clients} client${clients === 1 ? '' : 's'}`),
        agents > 0 && h('span', { class: 'badge agents' }, `${agents} agent${agents === 1 ? '' : 's'}`),
        tier &&
          h(
            'span',
            { class: 'tier' },
            tier.priority === undefined ? 'no traffic' : `P${tier.priority} · ${percent(tier.share)}`,
          ),
        matched && h('span', { class: 'here', title: 'the deepest node the client matched' }, '◎ matched'),
      ),
      n.endpoints && endpointChips(n, handlers.allChips?.has(key) ?? false),
    ),
  );
  li.querySelector('button.name')?.addEventListener('click', () => handlers.onPick(n.path));
  li.querySelector('button.toggle')?.addEventListener('click', () => handlers.onToggle?.(key));
  li.querySelector('button.more')?.addEventListener('click', () => handlers.onMore?.(key));
  return li;
}

function gutter(depth: number, continues: readonly boolean[], last: boolean, hasChildren: boolean): SVGElement {
  const x = (c: number) => c * STEP + STEP / 2;
  const svg = s('svg', { class: 'gutter', width: (depth + 1) * STEP, 'aria-hidden': 'true' });
  continues.forEach((goesOn, c) => {
    if (goesOn && c < depth - 1) svg.append(s('line', { x1: x(c), x2: x(c), y1: 0, y2: '100%' }));
  });
  if (depth > 0) {
    svg.append(s('line', { x1: x(depth - 1), x2: x(depth - 1), y1: 0, y2: last ? DOT_Y : '100%' }));
    svg.append(s('line', { x1: x(depth - 1), x2: x(depth), y1: DOT_Y, y2: DOT_Y }));
  }
  if (hasChildren) svg.append(s('line', { x1: x(depth), x2: x(depth), y1: DOT_Y, y2: '100%' }));
  svg.append(s('circle', { class: 'dot', cx: x(depth), cy: DOT_Y, r: 5 }));
  return svg;
}

/** Green for healthy, amber for winding down (draining, terminating), red for unhealthy, left to right. */
function healthBar(healthy: number, draining: number, total: number): SVGElement {
  const width = 72;
  const good = total > 0 ? Math.round((healthy / total) * width) : 0;
  const wind = total > 0 ? Math.round(((healthy + draining) / total) * width) : 0;
  const label = `${healthy} of ${total} healthy${draining > 0 ? `, ${draining} draining` : ''}`;
  return s(
    'svg',
    { class: 'health', width, height: 8, role: 'img', 'aria-label': label },
    s('rect', { class: 'bad', x: 0, y: 0, width, height: 8, rx: 2 }),
    wind > good && s('rect', { class: 'winding', x: 0, y: 0, width: wind, height: 8, rx: 2 }),
    good > 0 && s('rect', { class: 'good', x: 0, y: 0, width: good, height: 8, rx: 2 }),
  );
}

function endpointChips(n: ViewNode, all: boolean): HTMLElement {
  const eps = n.endpoints ?? [];
  const shown = all ? eps : eps.slice(0, MAX_ENDPOINT_CHIPS);
  return h(
    'div',
    { class: 'endpoints' },
    ...shown.map((e) =>
      h(
        'span',
        { class: `endpoint ${e.health}`, 'data-endpoint': e.key, title: `${e.key}: ${e.health}, weight ${e.weight}` },
        e.key,
        e.weight !== 1 ? h('small', {}, ` ×${e.weight}`) : undefined,
      ),
    ),
    eps.length > shown.length &&
      h(
        'button',
        { type: 'button', class: 'more', 'aria-label': `show all ${eps.length} endpoints` },
        `+${eps.length - shown.length} more`,
      ),
  );
}
