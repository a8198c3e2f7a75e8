/** How `npm run bench` prints the peer benchmark (peer.ts) and the goals it decides. */
import type { Goal } from './goals.js';
import { RATIO_FIGURES, SHARE_FIGURES, type PeerFigures, type PeerRow, type SideSpread } from './peer-figures.js';
import { decided, show, type Spread } from './stats.js';

const LABELS: Record<(typeof RATIO_FIGURES)[number], string> = {
  initialCpuMs: 'initial sync CPU ms',
  initialMainCpuMs: 'initial sync main-thread CPU ms (Go: process)',
  initialSysCpuMs: 'initial sync CPU in the kernel ms (page faults, socket writes)',
  initialWallMs: 'initial sync: ms until every stream holds its CLA',
  resyncCpuMs: 're-sync (every stream reconnects, warm server) CPU ms',
  resyncSysCpuMs: 're-sync CPU in the kernel ms',
  resyncWallMs: 're-sync: ms until every stream holds its CLA again',
  oneCpuMs: '1 flip CPU ms',
  oneMainCpuMs: '1 flip main-thread CPU ms (Go: process)',
  oneSysCpuMs: '1 flip CPU in the kernel ms',
  oneP50Ms: '1 flip delivery p50 ms',
  oneP99Ms: '1 flip delivery p99 ms',
  oneLastMs: '1 flip delivery, last stream ms',
  windowCpuPerS: 'a flip a second: CPU ms per second',
  windowP99Ms: 'a flip a second: delivery p99 ms',
  rssPerStreamKB: 'RSS per stream, settled KB',
  peakPerStreamKB: 'RSS per stream, peak KB',
  initialBytes: 'bytes per stream, initial sync',
  oneBytes: 'bytes per stream, 1 flip',
};

function table(r: PeerRow): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const k of RATIO_FIGURES) {
    if (!r.ratios[k]) continue; // not measured in this row (a delta row's window)
    out[LABELS[k]] = {
      canopy: show(r.canopy[k]),
      'go-control-plane': show(r.go[k]),
      'canopy ÷ go': show(r.ratios[k]!),
    };
  }
  out['1 flip delivery p99, Canopy less its 100 ms debounce'] = {
    canopy: '',
    'go-control-plane': '',
    'canopy ÷ go': show(r.oneP99LessDebounce),
  };
  if (r.protocol === 'delta' || !r.ratios.windowCpuPerS) return out; // no flip-a-second window in this row
  const late = (s: SideSpread) => `${show(s.windowLate)} late, ${show(s.windowMissing)} missing`;
  out['a flip a second: share of deliveries > 1 s'] = {
    canopy: late(r.canopy),
    'go-control-plane': late(r.go),
    'canopy ÷ go': '',
  };
  return out;
}

export function printPeer(p: PeerFigures | { skipped: string }): void {
  if ('skipped' in p) {
    console.log(`\nP. Against go-control-plane: skipped: ${p.skipped}`);
    return;
  }
  const window = p.windowS > 0 && p.rows.some((r) => r.protocol === 'sotw');
  console.log(
    `\nP. Against go-control-plane (${p.go}): the same mesh (${p.endpoints} endpoints, failover) from the same config file,\n` +
      `   streams over ${p.localities} client localities from one Go driver, CDS then EDS, all ACKed; ${p.pairs} interleaved pairs;\n` +
      `   one flip${window ? `, then (SotW) a flip a second for ${p.windowS} s` : ''}; median (min–max) of passes, ratios pair by pair`,
  );
  for (const r of p.rows) {
    const kind = r.protocol === 'delta' ? 'delta ADS, initial sync and one flip' : 'SotW ADS';
    console.log(
      `   ${r.streams} streams, ${kind}, against the ${r.peer} peer (CLAs checked equal for all ${r.checkedLocalities} client localities, every pair)`,
    );
    console.table(table(r));
  }
}

const PER_STREAM = ['initialCpuMs', 'oneCpuMs', 'windowCpuPerS', 'rssPerStreamKB', 'peakPerStreamKB'] as const;

export function peerGoals(p: PeerFigures): Goal[] {
  const out: Goal[] = [];
  for (const r of p.rows) {
    const ratios = RATIO_FIGURES.filter((k) => r.ratios[k] && !SHARE_FIGURES.has(k)).map(
      (k) => [k, r.ratios[k]!] as const,
    );
    const lost = ratios.filter(([, s]) => decided(s) > 1);
    out.push({
      goal: `every ratio Canopy ÷ go-control-plane (${r.peer}) ≤ 1.0 at ${r.streams} streams${r.protocol === 'delta' ? ', delta' : ''}`,
      figure: ratios.map(([k, s]) => `${k} ${show(s)}`).join('; '),
      met: lost.length === 0 ? 'met' : `NOT met: ${lost.map(([k]) => k).join(', ')}`,
    });
  }
  const sotw = p.rows.filter((r) => r.protocol === 'sotw' && r.peer === p.rows[0]?.peer);
  const small = sotw.find((r) => r.streams === 2000) ?? sotw[0];
  const big = sotw.find((r) => r.streams === 10000);
  if (small && big && small !== big) {
    const per = (r: PeerRow, k: (typeof PER_STREAM)[number]): number => {
      const s: Spread = r.canopy[k];
      return k.includes('PerStream') ? decided(s) : decided(s) / r.streams;
    };
    const growth = PER_STREAM.map((k) => [k, per(big, k) / per(small, k)] as const);
    out.push({
      goal: `Canopy at ${big.streams} streams no worse per stream than at ${small.streams}`,
      figure: growth.map(([k, x]) => `${k} ${x.toPrecision(2)}×`).join('; '),
      met: growth.every(([, x]) => x <= 1)
        ? 'met'
        : `NOT met: ${growth
            .filter(([, x]) => x > 1)
            .map(([k]) => k)
            .join(', ')}`,
    });
  }
  return out;
}
