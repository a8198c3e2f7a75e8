/** How `npm run bench` prints the server macro run (server.ts). */
import type { ProtocolFigures, ServerFigures, SideFigures } from './server-figures.js';
import { show } from './stats.js';

function row(side: string, f: SideFigures) {
  return {
    side,
    'initial CPU ms': show(f.initialCpuMs),
    'initial main-thread CPU ms': show(f.initialMainCpuMs),
    'initial wall ms': show(f.initialWallMs),
    'RSS KB/stream': show(f.rssPerStreamKB),
    ...Object.fromEntries(
      f.bursts.flatMap((b) => [
        [`${b.changes}-change p50/p99/max ms`, `${b.p50Ms}/${b.p99Ms}/${b.maxMs}`],
        [`${b.changes}-change p99 per pass`, show(b.p99PerPass)],
        [`${b.changes}-change CPU ms`, show(b.cpuMs)],
        [`${b.changes}-change main-thread CPU ms`, show(b.mainCpuMs)],
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
      `   ${macro.pairs} interleaved pairs (Canopy pass, bare pass; each pass: connect, one burst of each size), push window ${macro.pushWindow ?? 'default'}${macro.mallocMmapThreshold !== undefined ? `, both servers with MALLOC_MMAP_THRESHOLD_=${macro.mallocMmapThreshold}` : ''}${macro.heapGrowth !== undefined ? `, both servers with heap growth ${macro.heapGrowth}%` : ''}; ms to each stream's last response of a burst (client clock); bare = grpc-js writing the same bytes`,
  );
  const table = (what: string, p: ProtocolFigures | { skipped: string } | undefined): void => {
    if (!p) return;
    if ('skipped' in p) console.log(`   ${what}: skipped: ${p.skipped}`);
    else {
      console.table([row(`canopy ${what}`, p.canopy), row(`bare grpc-js ${what}`, p.bare)]);
      console.log(
        `   ${what} canopy ÷ bare, pair by pair: initial CPU ${show(p.ratios.initialCpu)} (main thread ${show(p.ratios.initialMainCpu)}); ` +
          p.ratios.bursts
            .map(
              (b) =>
                `${b.changes}-change p99 ${show(b.p99)} (less the debounce ${show(b.p99LessDebounce)}), CPU ${show(b.cpu)} (main thread ${show(b.mainCpu)})`,
            )
            .join('; '),
      );
    }
  };
  table('SotW', macro.sotw);
  table('LEDS', macro.leds);
}
