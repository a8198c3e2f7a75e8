/**
 * Section P's config load (peer-config.ts): its options, how `npm run bench` prints it, and the goal it
 * decides (issue 31: Canopy's load ÷ go-control-plane's ≤ 1.0).
 */
import type { Goal } from './goal.js';
import { AssignmentMismatch } from './peer-check.js';
import { peerConfigBench, type PeerConfigFigures } from './peer-config.js';
import { decided, MIN_RUNS, show } from './stats.js';

/**
 * `--peer-config-endpoints=N` (default 100,000; --quick 10,000), `--peer-config-rounds=5`,
 * `--peer-config-formats=yaml,json` (--quick: yaml), `--peer-config-check=L` (client localities of
 * each check pass, one stream each; default 200, --quick 100).
 */
export async function peerConfigSection(
  quick: boolean,
  arg: (name: string) => string | undefined,
  log: (text: string) => void,
): Promise<PeerConfigFigures | { skipped: string }> {
  const endpoints = Number(arg('peer-config-endpoints') ?? (quick ? 10_000 : 100_000));
  const formats = (arg('peer-config-formats') ?? (quick ? 'yaml' : 'yaml,json'))
    .split(',')
    .filter((f): f is 'yaml' | 'json' => f === 'yaml' || f === 'json');
  log(`P. config load against go-control-plane: ${endpoints} endpoints, ${formats.join(', ')}…`);
  try {
    return await peerConfigBench({
      endpoints,
      formats,
      rounds: Number(arg('peer-config-rounds') ?? MIN_RUNS),
      checkLocalities: Number(arg('peer-config-check') ?? (quick ? 100 : 200)),
      log,
    });
  } catch (err) {
    if (err instanceof AssignmentMismatch) throw err; // not a section that cannot run: a failed check
    return { skipped: (err as Error).message };
  }
}

export function printPeerConfig(f: PeerConfigFigures | { skipped: string }): void {
  console.log(
    '\nP. Config load against go-control-plane: the same file, spawn → ready to serve the assignment; load = ready\n' +
      '   less the same server on an empty config in the same round; median (min–max) of interleaved rounds',
  );
  if ('skipped' in f) {
    console.table(f);
    return;
  }
  console.log(`   ${f.go}; ${f.rounds} rounds; assignments equal after every pair`);
  for (const r of f.rows) {
    console.log(
      `   ${r.endpoints} endpoints, ${r.format}, ${r.fileMB} MB; ${r.checked} client localities checked per pair`,
    );
    const side = (s: PeerConfigFigures['rows'][number]['canopy']) => ({
      'empty start ms': show(s.floorMs),
      'ready ms': show(s.readyMs),
      'load ms': show(s.loadMs),
      'load CPU ms': show(s.loadCpuMs),
      'peak MB': show(s.peakMB),
      'peak added MB': show(s.peakAddedMB),
    });
    console.table({
      canopy: side(r.canopy),
      'go-control-plane': side(r.go),
      'canopy ÷ go': { 'load ms': show(r.loadRatio), 'load CPU ms': show(r.cpuRatio) },
    });
  }
}

export function peerConfigGoals(f: PeerConfigFigures | { skipped: string } | undefined): Goal[] {
  if (!f || 'skipped' in f) return [];
  return f.rows.map((r) => ({
    goal: `config load (${r.endpoints} endpoints, ${r.format}): Canopy ÷ go-control-plane ≤ 1.0`,
    figure: `${show(r.loadRatio)} (load ${show(r.canopy.loadMs)} vs ${show(r.go.loadMs)} ms; CPU ${show(r.cpuRatio)})`,
    met: decided(r.loadRatio) <= 1 ? 'met' : 'NOT met',
  }));
}
