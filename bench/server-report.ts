/** How `npm run bench` prints the server macro run (server.ts). */
import type { ProtocolFigures, ServerFigures, SideFigures } from './server.js';
import { show } from './stats.js';

function row(side: string, f: SideFigures) {
  return {
    side,
    'initial CPU ms': f.initialCpuMs,
    'initial wall ms': f.initialWallMs,
    'RSS KB/stream': f.rssPerStreamKB,
    ...Object.fromEntries(
      f.bursts.flatMap((b) => [
        [`${b.changes}-change p50/p99/max ms`, `${b.p50Ms}/${b.p99Ms}/${b.maxMs}`],
        [`${b.changes}-change pushes/stream`, show(b.pushesPerStream)],
        [`${b.changes}-change bytes/stream`, show(b.bytesPerStream)],
        [`${b.changes}-change peak RSS KB/stream`, b.peakRssPerStreamKB],
      ]),
    ),
  };
}

export function printServerMacro(macro: ServerFigures | { skipped: string }): void {
  if ('skipped' in macro) {
    console.log(`\n8. Server macro run skipped: ${macro.skipped}`);
    return;
  }
  console.log(
    `\n8. Server macro run: ${macro.streams} streams over ${macro.localities} localities, ${macro.endpoints} endpoints, ${macro.claBytes}-byte SotW CLAs,\n` +
      `   ${macro.rounds} rounds per burst, push window ${macro.pushWindow ?? 'default'}; ms to each stream's last response of a burst (client clock); bare = grpc-js writing the same bytes`,
  );
  const table = (what: string, p: ProtocolFigures | { skipped: string } | undefined): void => {
    if (!p) return;
    if ('skipped' in p) console.log(`   ${what}: skipped: ${p.skipped}`);
    else console.table([row(`canopy ${what}`, p.canopy), row(`bare grpc-js ${what}`, p.bare)]);
  };
  table('SotW', macro.sotw);
  table('LEDS', macro.leds);
}
