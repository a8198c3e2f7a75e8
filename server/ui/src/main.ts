/**
 * The page: pick a service, watch its tree live (the view is polled with an
 * ETag, so an unchanged view costs a 304), pick a client, a node or type a
 * locality to see its priority tiers and shares from /debug/explain.
 */
import {
  adminToken,
  explainUrl,
  fetchExplain,
  fetchView,
  HttpError,
  listServices,
  setAdminToken,
  type Explain,
  type PlacementQuery,
  type ServiceView,
} from './api.js';
import { byId, h } from './dom.js';
import { renderLoad } from './load.js';
import { renderClients, renderShares } from './panels.js';
import { refreshSkipped } from './skipped.js';
import { branchesToBestTier, pathKey, tierOverlay } from './tiers.js';
import { COLLAPSED_DEPTH, opensCollapsed, renderTree, type TreeOrder } from './tree.js';

const POLL_MS = 1000;
/** The server's ENDPOINT_LIST_LIMIT (server/src/admin/ui-view.ts): above it leaves list no endpoints. */
const ENDPOINT_LIST_LIMIT = 5000;

type Target =
  | { readonly kind: 'client'; readonly streamId: number; readonly placement: PlacementQuery; readonly label: string }
  | { readonly kind: 'place'; readonly placement: PlacementQuery; readonly label: string; readonly node?: string };

const state: {
  service: string;
  view: ServiceView | undefined;
  etag: string | undefined;
  target: Target | undefined;
  explain: Explain | undefined;
  explainError: string | undefined;
  pollError: string | undefined;
  updatedAt: Date | undefined;
  /** Nodes the user opened or closed (pathKey → collapsed); others follow the size rule below. */
  toggled: Map<string, boolean>;
  search: string;
  order: TreeOrder;
  allChips: Set<string>;
  /** The explained target whose best tier was last revealed (opened and scrolled to). */
  revealed: Target | undefined;
} = {
  service: new URLSearchParams(location.search).get('service') ?? '',
  view: undefined,
  etag: undefined,
  target: undefined,
  explain: undefined,
  explainError: undefined,
  pollError: undefined,
  updatedAt: undefined,
  toggled: new Map(),
  search: '',
  order: new URLSearchParams(location.search).get('order') === 'name' ? 'name' : 'problems',
  allChips: new Set(),
  revealed: undefined,
};

const els = {
  service: byId<HTMLSelectElement>('service'),
  token: byId<HTMLInputElement>('token'),
  tree: byId('tree'),
  search: byId<HTMLInputElement>('search'),
  order: byId<HTMLSelectElement>('order'),
  stale: byId('stale'),
  capped: byId('capped'),
  tokenBox: byId<HTMLDetailsElement>('token-box'),
  scopes: byId('scopes'),
  status: byId('status'),
  clients: byId('clients'),
  clientCount: byId('client-count'),
  loadPanel: byId('load-panel'),
  load: byId('load'),
  localityForm: byId<HTMLFormElement>('locality-form'),
  locality: byId<HTMLInputElement>('locality'),
  explain: byId('explain'),
  clearExplain: byId<HTMLButtonElement>('clear-explain'),
  links: {
    cla: byId<HTMLAnchorElement>('link-cla'),
    explain: byId<HTMLAnchorElement>('link-explain'),
    tree: byId<HTMLAnchorElement>('link-tree'),
  },
};

/** `?open=all` draws every node open (as the page did before it collapsed big trees): the benchmark's baseline. */
const OPEN_ALL = new URLSearchParams(location.search).get('open') === 'all';

function render(): void {
  const view = state.view;
  if (!view) return;
  // performance.measure('canopy-render') times each render (the benchmark reads them).
  performance.mark('canopy-render-start');
  const overlay = state.explain ? tierOverlay(view, state.explain) : undefined;
  const selectedNode = state.target?.kind === 'place' ? state.target.node : undefined;
  const big = !OPEN_ALL && opensCollapsed(view);
  const isCollapsed = (key: string, depth: number) => state.toggled.get(key) ?? (big && depth >= COLLAPSED_DEPTH);
  els.tree.replaceChildren(
    renderTree(view, overlay, selectedNode, {
      onPick: (path) => pickNode(view, path),
      isCollapsed,
      onToggle: (key) => {
        state.toggled.set(key, !isCollapsed(key, key === '' ? 0 : key.split('/').length));
        render();
      },
      search: state.search,
      order: state.order,
      allChips: state.allChips,
      onMore: (key) => {
        state.allChips.add(key);
        render();
      },
    }),
  );
  els.scopes.textContent = `${view.scopes.join(' → ')} · ${view.mode} · generation ${view.generation}`;
  // Where a list is capped, say so where the list would be.
  els.capped.hidden = view.endpointsListed;
  els.capped.textContent = view.endpointsListed
    ? ''
    : `${view.root.total.toLocaleString()} endpoints: above ${ENDPOINT_LIST_LIMIT.toLocaleString()} the leaves show counts, not each endpoint (every endpoint: /debug/tree/${view.service}).`;
  const clients = view.clients.filter((c) => c.kind === 'client').length;
  const agents = view.clients.length - clients;
  els.clientCount.textContent = `${clients} client${clients === 1 ? '' : 's'}, ${agents} agent${agents === 1 ? '' : 's'}`;
  placeExplain(selectedNode);
  const selected = state.target?.kind === 'client' ? state.target.streamId : undefined;
  els.clients.replaceChildren(renderClients(view, selected, selectClient));
  els.loadPanel.hidden = !view.load;
  els.load.replaceChildren(...(view.load ? [renderLoad(view.load, view.service)] : []));
  renderExplain();
  renderLinks();
  performance.measure('canopy-render', 'canopy-render-start');
}

/** Where the explanation panel lives on a wide screen; on a narrow one it follows the tapped node. */
const explainHome = els.explain.parentElement;
const narrow = window.matchMedia('(max-width: 900px)');

function placeExplain(selectedNode: string | undefined): void {
  const row =
    selectedNode !== undefined ? els.tree.querySelector(`li.node[data-path="${CSS.escape(selectedNode)}"]`) : null;
  if (narrow.matches && row) {
    const li = h('li', { class: 'explain-inline', role: 'none' });
    row.after(li);
    li.append(els.explain);
  } else if (els.explain.parentElement !== explainHome) explainHome?.append(els.explain);
}

function renderExplain(): void {
  els.clearExplain.hidden = !state.target;
  if (!state.target) {
    els.explain.replaceChildren(
      h(
        'p',
        { class: 'hint' },
        'Pick a client, click a node of the tree or type a locality to see its priority tiers.',
      ),
    );
    return;
  }
  const title = h('h3', {}, state.target.label);
  if (state.explainError) {
    els.explain.replaceChildren(title, h('p', { class: 'error' }, `Explain failed: ${state.explainError}`));
  } else if (state.explain) {
    els.explain.replaceChildren(title, renderShares(state.explain));
  } else {
    els.explain.replaceChildren(title, h('p', { class: 'hint' }, 'Loading…'));
  }
}

function renderLinks(): void {
  const service = state.service;
  const placement = state.target?.placement ?? { locality: { region: '', zone: '', subzone: '' } };
  els.links.explain.href = explainUrl(service, placement);
  els.links.cla.href = explainUrl(service, placement).replace('/debug/explain?', '/debug/cla?');
  els.links.tree.href = `/debug/tree/${encodeURIComponent(service)}`;
}

function renderStatus(): void {
  // When updates stop, say so at the top and grey the data: it may no longer be true.
  document.body.classList.toggle('stale', state.pollError !== undefined);
  els.stale.hidden = state.pollError === undefined;
  els.stale.textContent = state.pollError
    ? `Not updating since ${state.updatedAt?.toLocaleTimeString() ?? 'the page loaded'}: ${state.pollError}. What is shown may be out of date.`
    : '';
  if (state.pollError) {
    els.status.className = 'status error';
    els.status.textContent = `Not updating: ${state.pollError}`;
  } else {
    els.status.className = 'status live';
    els.status.textContent = `Live (every ${POLL_MS / 1000} s) · updated ${state.updatedAt?.toLocaleTimeString() ?? '—'}`;
  }
}

function selectClient(c: ServiceView['clients'][number]): void {
  setTarget({
    kind: 'client',
    streamId: c.streamId,
    placement: {
      locality: c.placement.locality,
      network: c.placement.network,
      node: c.placement.node,
      cluster: c.placement.cluster,
      labels: c.placement.labels,
    },
    label: `${c.kind === 'agent' ? 'Agent' : 'Client'} ${c.nodeId || `stream ${c.streamId}`}`,
  });
}

/** A client placed at a tree node: its path's values at the tree's scopes, deeper scopes left empty. */
function pickNode(view: ServiceView, path: readonly string[]): void {
  const locality = { region: '', zone: '', subzone: '' };
  const other: Record<string, string> = {};
  const labels: Record<string, string> = {};
  view.scopes.forEach((scope, i) => {
    const value = path[i];
    if (value === undefined) return;
    if (scope === 'region' || scope === 'zone' || scope === 'subzone') locality[scope] = value;
    else if (scope.startsWith('label:')) labels[scope.slice('label:'.length)] = value;
    else other[scope] = value;
  });
  setTarget({
    kind: 'place',
    placement: { locality, labels, ...other },
    label: `A client at ${path.length ? path.join(' / ') : 'the root'}`,
    node: pathKey(path),
  });
}

function setTarget(target: Target | undefined): void {
  state.target = target;
  state.explain = undefined;
  state.explainError = undefined;
  render();
  void refreshExplain();
}

/**
 * Opens the branches that hold the explained client's best (priority-0) nodes, then scrolls the first
 * of them into view: in a collapsed tree of hundreds of nodes they would otherwise be folded away.
 */
function revealBestTier(): void {
  const view = state.view;
  if (!view || !state.explain) return render();
  const overlay = tierOverlay(view, state.explain);
  for (const key of branchesToBestTier(view, overlay)) state.toggled.set(key, false);
  render();
  const first = els.tree.querySelector(`li.node[data-tier="${overlay.priorities[0]}"]:not([aria-expanded="true"])`);
  first?.scrollIntoView({ block: 'center' });
}

let explainSeq = 0;
async function refreshExplain(): Promise<void> {
  const target = state.target;
  if (!target || !state.service) return;
  const seq = ++explainSeq;
  try {
    const explain = await fetchExplain(state.service, target.placement);
    if (seq !== explainSeq) return;
    state.explain = explain;
    state.explainError = undefined;
    if (state.revealed !== target) {
      state.revealed = target;
      revealBestTier();
      return;
    }
  } catch (err) {
    if (seq !== explainSeq) return;
    state.explain = undefined;
    state.explainError =
      err instanceof HttpError && err.status === 404 && err.message.includes('no route')
        ? 'this server has no /debug/explain'
        : (err as Error).message;
  }
  render();
}

let pollTimer: ReturnType<typeof setTimeout> | undefined;
let pollLoop = 0;
let ticks = 0;
let serviceGone = false;
/** One poll loop at a time: starting one (a new service, a new token) ends the one before. */
async function poll(loop = ++pollLoop): Promise<void> {
  clearTimeout(pollTimer);
  try {
    // Services come and go less often: the picker is refreshed every fifth poll, and at once when
    // the service shown is gone (refreshing may choose another, which starts its own loop).
    if (++ticks % 5 === 0 || serviceGone) {
      serviceGone = false;
      void refreshSkipped();
      await refreshServices();
      if (loop !== pollLoop) return;
    }
    const service = state.service;
    if (service) {
      const next = await fetchView(service, state.etag);
      if (loop !== pollLoop) return;
      if (next) {
        state.view = next.view;
        state.etag = next.etag;
        render();
        // Health or clients changed: the explained client's tiers may have too.
        if (state.target) void refreshExplain();
      }
    }
    state.pollError = undefined;
    state.updatedAt = new Date();
  } catch (err) {
    if (loop !== pollLoop) return;
    serviceGone = err instanceof HttpError && err.status === 404;
    const unauthorized = err instanceof HttpError && err.status === 401;
    state.pollError = unauthorized ? `${err.message} (enter the admin token)` : String((err as Error).message);
    if (unauthorized && !els.tokenBox.open) {
      els.tokenBox.open = true;
      els.token.focus();
    }
  }
  renderStatus();
  if (loop === pollLoop) pollTimer = setTimeout(() => void poll(loop), POLL_MS);
}

function chooseService(name: string): void {
  state.service = name;
  state.view = undefined;
  state.etag = undefined;
  state.target = undefined;
  state.explain = undefined;
  els.tree.replaceChildren(h('p', { class: 'hint' }, name ? 'Loading…' : 'No service is configured.'));
  const url = new URL(location.href);
  if (name) url.searchParams.set('service', name);
  else url.searchParams.delete('service');
  history.replaceState(null, '', url);
  renderExplain();
  void poll();
}

let servicesShown = '';
/** Refreshes the picker; unless `choose` says which to show, a service that went away gives way to the first left. */
async function refreshServices(choose?: string): Promise<void> {
  const services = await listServices();
  const shown = JSON.stringify(services);
  if (shown !== servicesShown) {
    servicesShown = shown;
    els.service.replaceChildren(
      ...services.map((s) => h('option', { value: s.name }, `${s.name} (${s.endpoints} endpoints, ${s.mode})`)),
    );
  }
  const first = services[0]?.name ?? '';
  if (choose !== undefined) chooseService(services.some((s) => s.name === choose) ? choose : first);
  else if (!services.some((s) => s.name === state.service)) chooseService(first);
  els.service.value = state.service;
}

async function loadServices(): Promise<void> {
  try {
    await refreshServices(state.service);
  } catch (err) {
    state.pollError = (err as Error).message;
    if (err instanceof HttpError && err.status === 401) {
      state.pollError = `${err.message} (enter the admin token)`;
      els.tokenBox.open = true;
      els.token.focus();
    }
    renderStatus();
    setTimeout(() => void loadServices(), POLL_MS * 3);
  }
}

els.service.addEventListener('change', () => chooseService(els.service.value));
els.order.value = state.order;
els.order.addEventListener('change', () => {
  state.order = els.order.value === 'name' ? 'name' : 'problems';
  render();
});
els.search.addEventListener('input', () => {
  state.search = els.search.value;
  render();
});
els.token.value = adminToken();
els.token.addEventListener('change', () => {
  setAdminToken(els.token.value.trim());
  void loadServices();
});
els.localityForm.addEventListener('submit', (e) => {
  e.preventDefault();
  const text = els.locality.value.trim();
  const [region = '', zone = '', subzone = ''] = text.split('/').map((p) => p.trim());
  setTarget({
    kind: 'place',
    placement: { locality: { region, zone, subzone } },
    label: `A client at ${text || '(no locality)'}`,
  });
});
els.clearExplain.addEventListener('click', () => setTarget(undefined));
renderExplain();
void loadServices();
void refreshSkipped();
