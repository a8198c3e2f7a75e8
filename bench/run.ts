/**
 * `npm run bench [-- --quick]`: every benchmark section, each against a
 * baseline run in the same process on the same data, because the machines
 * are shared and noisy. Prints tables and the goals, and writes
 * bench/results/latest.json (a full run also bench/results/full.json).
 *
 *   1. CLA generation: Canopy vs the ztunnel rank loop vs Istio-style
 *   2. Incremental update: one endpoint at 100k endpoints vs a full rebuild
 *   3. Fan-out to real ADS streams vs a raw write of the same bytes
 *   4. Memory per connected stream
 *   5. Wire size per endpoint: CLA and compiled tree
 *   6. Kernel: publish (batch vs single), ns per connect() with and without the program
 *   1b. CLA work vs a plain builder memoized by tree node (same bytes, checked), cold and after one change
 *   7. Config load: `canopy serve` on a 100k-endpoint file, ready time and RSS, first start and restart
 *   7b. Admin API p99 while a running server parses a 50 MB edit of its file
 *   8. Server macro run: `canopy serve` and a bare grpc-js server as processes, streams from a client process
 *   P. Against go-control-plane: `canopy serve` and a go-control-plane server on the same mesh, one Go driver
 *   F. Framed copy: grpc-js's per-stream copy of a shared response vs node:http2 writing it uncopied
 *
 * Benchmarks measure; they never fail. A section that cannot run here says why.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { claGeneration, wireSize } from './cla.js';
import { claShapes, fanoutRuns, memoizedShapes } from './run-shapes.js';
import { round } from './data.js';
import { runFanout, type FanoutFigures } from './fanout.js';
import { incrementalUpdate } from './incremental.js';
import { runKernelBench, type KernelFigures } from './kernel.js';
import { configLoad, printConfigLoad, type ConfigLoadFigures } from './config-load.js';
import { adminDuringReload, type AdminDuringReloadFigures } from './config-reload.js';
import { memoizedComparison, type MemoizedFigures } from './memoized.js';
import type { ServerFigures } from './server-figures.js';
import { serverMacro, type ServerMode } from './server.js';
import { printServerMacro } from './server-report.js';
import { show } from './stats.js';
import { goalReport, scaleGoals } from './goals.js';
import { peerSection } from './peer.js';
import type { PeerFigures } from './peer-figures.js';
import { peerGoals, printPeer } from './peer-report.js';
import { peerConfigGoals, peerConfigSection, printPeerConfig } from './peer-config-report.js';
import { framedCopySection, printFramedCopy } from './framed-copy.js';

const quick = process.argv.includes('--quick');
const only = process.argv
  .find((a) => a.startsWith('--only='))
  ?.slice('--only='.length)
  .split(',');
const wants = (section: string): boolean => !only || only.includes(section);
/** Sections that spawn servers and clients: left out of --quick unless named in --only. */
const wantsProcesses = (section: string): boolean => (only ? only.includes(section) : !quick);

function log(text: string): void {
  process.stderr.write(`${text}\n`);
}

const arg = (name: string): string | undefined =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);

async function main() {
  const machine = {
    cores: os.cpus().length,
    cpu: os.cpus()[0]?.model ?? '',
    memoryGiB: round(os.totalmem() / 2 ** 30, 1),
    node: process.version,
    kernel: os.release(),
    exposeGc: typeof (globalThis as { gc?: unknown }).gc === 'function',
  };
  const results: Record<string, unknown> = { machine, mode: quick ? 'quick' : 'full', at: new Date().toISOString() };
  const started = Date.now();

  const cla: Awaited<ReturnType<typeof claGeneration>>[] = [];
  if (wants('cla')) {
    for (const s of claShapes(quick)) {
      log(`1. CLA generation ${s.endpoints} endpoints × ${s.clients} clients × ${s.localities} localities…`);
      cla.push(await claGeneration(s, { quick }));
    }
    results['claGeneration'] = cla;
  }

  const memo: MemoizedFigures[] = [];
  if (wants('memo')) {
    const memoShapes = memoizedShapes(quick);
    for (const s of memoShapes) {
      log(
        `1b. CLA work vs memoized baselines, ${s.endpoints} endpoints × ${s.clients} clients × ${s.localities} localities…`,
      );
      memo.push(await memoizedComparison(s));
    }
    results['memoized'] = memo;
  }

  let incremental: ReturnType<typeof incrementalUpdate> | undefined;
  if (wants('incremental')) {
    log('2. incremental update at 100k endpoints…');
    incremental = incrementalUpdate({
      endpoints: 100_000,
      clients: 10_000,
      localities: 1000,
      rounds: quick ? 20 : 100,
      rebuilds: quick ? 1 : 3,
    });
    results['incrementalUpdate'] = incremental;
  }

  const fanout: (FanoutFigures | { streams: number; endpoints: number; skipped: string })[] = [];
  if (wants('fanout')) {
    const runs = fanoutRuns(quick);
    // --fanout-streams=1000,10000: only those rows (the knee goal needs the 1,000 and 10,000 rows at 1,000 endpoints).
    const pick = process.argv
      .find((x) => x.startsWith('--fanout-streams='))
      ?.slice('--fanout-streams='.length)
      .split(',')
      .map(Number);
    for (const r of runs.filter((x) => !pick || (pick.includes(x.streams) && x.endpoints === 1000))) {
      log(`3/4. fan-out to ${r.streams} streams, ${r.endpoints}-endpoint service…`);
      try {
        fanout.push(await runFanout({ ...r, localities: 100, rounds: quick ? 3 : 5 }));
      } catch (err) {
        fanout.push({ ...r, skipped: (err as Error).message });
      }
    }
    results['fanout'] = fanout;
  }

  let wire: ReturnType<typeof wireSize>[] = [];
  if (wants('wire')) {
    wire = (quick ? [1000, 10000] : [1000, 10000, 100000]).map(wireSize);
    results['wireSize'] = wire;
  }

  let kernel: KernelFigures | undefined;
  if (wants('kernel')) {
    log('6. kernel datapath…');
    try {
      kernel = await runKernelBench(quick);
    } catch (err) {
      kernel = { skipped: (err as Error).message };
    }
    results['kernel'] = kernel;
  }
  let configs: ConfigLoadFigures[] | { skipped: string } | undefined;
  if (wantsProcesses('config')) {
    log('7. config load: canopy serve on big config files…');
    try {
      configs = await configLoad(quick);
    } catch (err) {
      configs = { skipped: (err as Error).message };
    }
    results['configLoad'] = configs;
  }
  let reload: AdminDuringReloadFigures | { skipped: string } | undefined;
  if (wantsProcesses('reload')) {
    log('7b. admin API during a big config reload…');
    try {
      reload = await adminDuringReload(quick);
    } catch (err) {
      reload = { skipped: (err as Error).message };
    }
    results['adminDuringReload'] = reload;
  }
  let macro: ServerFigures | { skipped: string } | undefined;
  const serverModes = (['sotw', 'leds'] as const).filter(
    (m: ServerMode) => wantsProcesses('server') || wantsProcesses(`server-${m}`),
  );
  if (serverModes.length > 0) {
    const shape = quick
      ? { streams: 200, endpoints: 1000, localities: 100 }
      : { streams: 2000, endpoints: 10000, localities: 1000 };
    log(
      `8. server macro run (${serverModes.join(', ')}): canopy serve, ${shape.streams} streams, ${shape.endpoints} endpoints…`,
    );
    try {
      const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
      const window = arg('push-window');
      // --malloc-mmap-threshold=131072: both servers with glibc's mmap threshold fixed (docs/benchmarks.md, memory).
      const mmap = arg('malloc-mmap-threshold');
      // --heap-growth=0: both servers with V8's own heap growth factor (default: canopy serve's, on both).
      const heapGrowth = arg('heap-growth');
      // --server-pairs=N: N interleaved pairs instead of 5 (one pair per run when runs themselves are interleaved).
      const pairs = arg('server-pairs');
      macro = await serverMacro({
        ...shape,
        ...(pairs ? { pairs: Number(pairs) } : {}),
        modes: serverModes,
        ...(window ? { pushWindow: Number(window) } : {}),
        ...(mmap ? { mallocMmapThreshold: Number(mmap) } : {}),
        ...(heapGrowth ? { heapGrowth: Number(heapGrowth) } : {}),
      });
    } catch (err) {
      macro = { skipped: (err as Error).message };
    }
    results['server'] = macro;
  }
  let peer: PeerFigures | { skipped: string } | undefined;
  if (wantsProcesses('peer')) {
    peer = await peerSection(quick, arg, log);
    results['peer'] = peer;
  }
  const peerConfig = wantsProcesses('peer-config') ? await peerConfigSection(quick, arg, log) : undefined;
  if (peerConfig) results['peerConfig'] = peerConfig;
  const framed = wantsProcesses('framed-copy') ? await framedCopySection(quick, arg, log) : undefined;
  if (framed) results['framedCopy'] = framed;
  results['seconds'] = Math.round((Date.now() - started) / 1000);

  // ------------------------------------------------------------ report
  console.log(
    `machine: ${machine.cores} cores, ${machine.memoryGiB} GiB, ${machine.cpu}, Node ${machine.node}, Linux ${machine.kernel} (${results['mode']})`,
  );
  if (cla.length) {
    console.log(
      '\n1. CLA generation: CPU ms, median of 5 Canopy runs; speedup = baseline / Canopy.\n' +
        '   canopy: a fresh tree, every leaf part built in the run (cold); flat: also one contiguous copy per CLA;\n' +
        '   warm: the same tree again with an empty CLA cache (leaf parts built); tree build timed apart',
    );
    console.table(
      cla.map((r) => ({
        endpoints: r.endpoints,
        clients: r.clients,
        localities: r.localities,
        'cached CLAs': r.cachedClas,
        'canopy ms': r.canopyMs,
        'canopy flat ms': r.canopyFlatMs,
        'canopy warm ms': r.canopyWarmMs,
        'rank loop ms': r.rankLoopMs,
        'istio ms': r.istioScaledFrom ? `${r.istioMs} (from ${r.istioScaledFrom})` : r.istioMs,
        'ns/ep canopy': r.canopyNsPerEndpoint,
        'ns/ep rank': r.rankLoopNsPerEndpoint,
        'tree build ms': r.treeBuildMs,
        '× rank': r.speedupVsRankLoop,
        '× rank flat': r.speedupVsRankLoopFlat,
        '× rank warm': r.speedupVsRankLoopWarm,
        '× rank flat+build': r.speedupVsRankLoopWithTreeBuild,
        '× istio': r.speedupVsIstio,
      })),
    );
  }
  if (memo.length) {
    console.log(
      "\n1b. CLA work, endpoints → every stream's bytes, CPU ms: median (min–max) of interleaved pairs. Canopy: tree build,\n" +
        '    CLA cache, one contiguous copy per distinct CLA. Baseline: a plain builder memoized by tree node (the key its\n' +
        '    outputs are equal under), each locality body encoded once with encodeRunBody; bytes checked equal for every client.\n' +
        '    Incremental: one health flip, then every CLA ready again (µs, wall); the baseline re-encodes the changed body and\n' +
        '    rebuilds the CLAs holding it',
    );
    console.table(
      memo.map((m) => ({
        endpoints: m.endpoints,
        clients: m.clients,
        localities: m.localities,
        'distinct CLAs': m.distinctClas,
        'baseline builds': m.baselineBuilds,
        'canopy ms': show(m.canopyMs),
        'baseline ms': show(m.baselineMs),
        '× cold': show(m.timesCheaper),
        'incr canopy µs': show(m.incremental.canopyUs),
        'incr baseline µs': show(m.incremental.baselineUs),
        '× incremental': show(m.incremental.timesCheaper),
        pairs: m.pairs,
      })),
    );
  }
  if (configs) printConfigLoad(configs);
  if (reload) {
    console.log(
      '\n7b. Admin API during a config reload: GET /healthz every 5 ms while `canopy serve` parses a big edit of its file\n' +
        '    (between its "parsing" and "parsed" log lines) vs the same client on the idle server just before; median (min–max) of 5 reloads',
    );
    console.table(
      'skipped' in reload
        ? reload
        : [
            {
              'file MB': reload.fileMB,
              endpoints: reload.endpoints,
              'parse ms': show(reload.parseMs),
              'answers during parse': show(reload.answersDuringParse),
              'p99 during parse ms': show(reload.duringParseP99Ms),
              'p99 idle ms': show(reload.idleP99Ms),
              '× idle': show(reload.timesIdle),
            },
          ],
    );
  }
  if (macro) printServerMacro(macro);
  if (peer) printPeer(peer);
  if (peerConfig) printPeerConfig(peerConfig);
  if (framed) printFramedCopy(framed);
  if (incremental) {
    console.log(
      `\n2. Incremental update: ${incremental.endpoints} endpoints, ${incremental.clients} clients over ${incremental.localities} localities, ${incremental.claEntries} CLAs; µs until every CLA is ready (${incremental.rounds} rounds)`,
    );
    console.table({ add: incremental.add, 'health flip': incremental.flip, remove: incremental.remove });
    console.log(
      `   CLAs whose version moved per change: ${incremental.entriesWhoseVersionMoved}; full rebuild: ${incremental.fullRebuildMs} ms (${incremental.speedupVsRebuild}× the slowest median)`,
    );
  }
  if (fanout.length) {
    console.log(
      '\n3/4. Fan-out: one endpoint change → every stream ACKed (ms, at the server); raw = same bytes written by a bare grpc-js server',
    );
    console.table(
      fanout.map((f) =>
        'skipped' in f
          ? { streams: f.streams, endpoints: f.endpoints, skipped: f.skipped }
          : {
              streams: f.streams,
              'CLA bytes': f.claBytes,
              'p50 canopy': f.canopy.p50Ms,
              'p99 canopy': f.canopy.p99Ms,
              'max canopy': f.canopy.maxMs,
              'p50 raw': f.rawWrite.p50Ms,
              'p99 raw': f.rawWrite.p99Ms,
              'max raw': f.rawWrite.maxMs,
              '× raw p99': f.ratioP99,
              'push loop ms': f.canopyPushLoopMs,
              'raw loop ms': f.rawWriteLoopMs,
              // Below 1,000 streams the per-stream share drowns in the process's own noise.
              'RSS KB/stream': f.streams >= 1000 ? f.memory.rssPerStreamKB : '—',
              'heap KB/stream': f.streams >= 1000 ? f.memory.heapPerStreamKB : '—',
              'bare grpc heap KB/stream': f.streams >= 1000 ? f.memory.bareGrpcHeapPerStreamKB : '—',
            },
      ),
    );
  }
  if (wire.length) {
    console.log('\n5. Wire size (IPv4 endpoints): a CLA with every endpoint, and the compiled LocalityTree');
    console.table(wire);
  }
  if (kernel) {
    console.log('\n6. Kernel datapath');
    console.table(kernel);
  }

  const goals = [
    ...goalReport(cla, incremental, fanout, wire),
    ...scaleGoals(memo, configs, macro, reload),
    ...(peer && !('skipped' in peer) ? peerGoals(peer) : []),
    ...peerConfigGoals(peerConfig),
  ];
  results['goals'] = goals;
  console.log('\nGoals');
  console.table(goals);

  const dir = fileURLToPath(new URL('../../bench/results/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const json = `${JSON.stringify(results, null, 2)}\n`;
  writeFileSync(`${dir}latest.json`, json);
  if (!quick && !only) writeFileSync(`${dir}full.json`, json);
  console.log(
    `\nwrote bench/results/latest.json${!quick && !only ? ' and bench/results/full.json' : ''} (${results['seconds']} s)`,
  );
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
