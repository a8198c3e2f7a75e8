/**
 * The "Skipped input" panel: what some source wrote that the admin API's rules refuse (an EndpointSlice's
 * port 70000, a multicast address, a bad name), so it is not served: the object, the field, the value, why.
 * Hidden while nothing is skipped.
 */
import { listSkipped, type SkippedEntry } from './api.js';
import { byId, h } from './dom.js';

let shown = '';

/** Reads /api/v1/skipped and redraws the panel when it changed; a failed read leaves the panel as it was. */
export async function refreshSkipped(): Promise<void> {
  let skipped: SkippedEntry[];
  try {
    skipped = await listSkipped();
  } catch {
    return; // the status line reports the server's errors; this panel only adds to it
  }
  const text = JSON.stringify(skipped);
  if (text === shown) return;
  shown = text;
  byId('skipped-panel').hidden = skipped.length === 0;
  byId('skipped-count').textContent = `${skipped.length}`;
  byId('skipped').replaceChildren(
    h(
      'table',
      { class: 'skipped' },
      h(
        'thead',
        {},
        h('tr', {}, h('th', {}, 'object'), h('th', {}, 'field'), h('th', {}, 'value'), h('th', {}, 'left out · why')),
      ),
      h(
        'tbody',
        {},
        ...skipped.map((s) =>
          h(
            'tr',
            { class: `skip left-${s.left}`, title: `from ${s.source}${s.since ? `, since ${s.since}` : ''}` },
            h('td', {}, s.object),
            h('td', {}, s.path || '(all of it)'),
            h('td', {}, s.value ?? ''),
            h(
              'td',
              {},
              s.left === 'service' ? `service ${s.service}` : `${s.endpoints ?? 1} endpoint(s) of ${s.service}`,
              h('div', { class: 'why' }, s.message),
            ),
          ),
        ),
      ),
    ),
  );
}
