/**
 * Load-aware locality, kernel path (issue 20), end to end: `canopy serve
 * --config` with a load-aware service, `canopy agent` attached to a cgroup,
 * real TCP connects from a workload process in it, real backends on
 * loopback. The agent reports the connects its BPF program counts over LRS,
 * so they are the only load Canopy sees: past zone A's capacity the plan
 * spills to zone B, the compiled tree carries the weights, the program's
 * weighted pick follows them; when the load stops the plan returns to zone
 * A and so do the connects.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { startAgentProcess, type AgentProcess } from './support/agent-process.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { Connector, counts, idBackend, kernelEnv, testCgroup } from './support/kernel.js';

const env = kernelEnv();

const VIP = '127.100.0.20';
const PORT = 8090;
const INTERVAL_MS = 1000;
/** Per endpoint: zone A (two endpoints) takes 20 connects a second, region r1 (A and B) 40. */
const CAPACITY_RPS = 10;
/** Zone A's 20, and 10 spilled to zone B: nothing need go to the other region. */
const OFFERED_RPS = 30;
const BACKENDS = [
  ['a1', '127.0.0.61', 'r1/za/s'],
  ['a2', '127.0.0.62', 'r1/za/s'],
  ['b1', '127.0.0.63', 'r1/zb/s'],
  ['b2', '127.0.0.64', 'r1/zb/s'],
  ['c1', '127.0.0.65', 'r2/zc/s'],
  ['c2', '127.0.0.66', 'r2/zc/s'],
] as const;

const zoneOf = (id: string) => id[0]!;

interface LoadDebug {
  readonly epoch: number;
  readonly clientNodes?: readonly {
    readonly path: string;
    readonly offeredRps: number;
    readonly weights: Record<string, number>;
  }[];
  readonly landedRps?: Record<string, number>;
}

/** Connects `rps` a second (in steps of 100 ms) until stopped, at most `maxMs`: what each reached, when. */
class PacedLoad {
  readonly samples: [number, string][] = [];
  failures = 0;
  private stopped = false;
  readonly done: Promise<void>;

  constructor(c: Connector, rps: number, maxMs: number) {
    const per = Math.max(1, Math.round(rps / 10));
    this.done = (async () => {
      const end = Date.now() + maxMs;
      let next = Date.now();
      while (!this.stopped && Date.now() < end) {
        const r = await c.connect(VIP, PORT, per);
        const t = Date.now();
        for (const id of r.ids) this.samples.push([t, id]);
        this.failures += Object.values(r.errors).reduce((a, b) => a + b, 0);
        next += 100;
        await sleep(Math.max(0, next - Date.now()));
      }
    })();
  }

  between(from: number, to: number): Record<string, number> {
    const out: Record<string, number> = { a: 0, b: 0, c: 0 };
    for (const [t, id] of this.samples) if (t >= from && t < to) out[zoneOf(id)]! += 1;
    return out;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.done;
  }
}

describe(
  'load-aware locality in the kernel: connects counted as load, the spill in BPF',
  { skip: env.reason, timeout: 120_000 },
  () => {
    let canopy: CanopyProcess;
    let agent: AgentProcess;
    let cg: ReturnType<typeof testCgroup>;
    let loadConn: Connector;
    let probe: Connector;
    let load: PacedLoad | undefined;
    /** A workload with a locality of its own (zone C), offering a little load. */
    let eastConn: Connector;
    let eastLoad: PacedLoad | undefined;
    const backends: Awaited<ReturnType<typeof idBackend>>[] = [];

    const debugLoad = async (): Promise<LoadDebug> => {
      const r = await canopy.admin('GET', '/debug/load/echo');
      assert.equal(r.status, 200, JSON.stringify(r.body));
      return r.body as LoadDebug;
    };
    const nodeA = (d: LoadDebug) => d.clientNodes?.find((n) => n.path === 'r1/za/s');
    /** Polls /debug/load (bounded) until `ok`. */
    const waitFor = async (what: string, ok: (d: LoadDebug) => boolean, ms = 25_000): Promise<LoadDebug> => {
      const end = Date.now() + ms;
      let d = await debugLoad();
      while (!ok(d)) {
        if (Date.now() > end) assert.fail(`${what}: ${JSON.stringify(d)}`);
        await sleep(200);
        d = await debugLoad();
      }
      return d;
    };
    const probeZones = async (n: number) => {
      const r = await probe.connect(VIP, PORT, n);
      assert.deepEqual(r.errors, {}, 'no failed connect');
      return counts(r.ids.map(zoneOf));
    };

    before(async () => {
      cg = testCgroup('load');
      const work = cg.child('work');
      const east = cg.child('east');
      for (const [id, host] of BACKENDS) backends.push(await idBackend(host, PORT, id));
      canopy = await startCanopyProcess({
        server: { debounceMs: 20, loadReportingIntervalMs: INTERVAL_MS },
        services: [
          {
            name: 'echo',
            vip: VIP,
            port: PORT,
            loadBalancing: {
              mode: 'failover',
              routingPreference: ['region', 'zone', 'subzone'],
              loadAware: { balancing: 'waterfall', capacityRps: CAPACITY_RPS },
            },
            endpoints: BACKENDS.map(([, address, l]) => {
              const [region, zone, subzone] = l.split('/');
              return { address, port: PORT, locality: { region, zone, subzone } };
            }),
          },
        ],
      });
      agent = await startAgentProcess([
        ...['--server', canopy.xdsUri, '--node-id', 'kernel-node-a'],
        ...['--region', 'r1', '--zone', 'za', '--subzone', 's'],
        ...['--cgroup', cg.dir, '--pin-dir', cg.pinDir, '--grace-ms', '100'],
        ...['--workload', 'east=region=r2,zone=zc,subzone=s'],
      ]);
      await agent.waitForLog((l) => l.msg === 'tree version applied');
      loadConn = await Connector.start(work);
      eastConn = await Connector.start(east);
      probe = await Connector.start(work);
    });

    after(async () => {
      await load?.stop();
      await eastLoad?.stop();
      eastConn?.close();
      loadConn?.close();
      probe?.close();
      await agent?.stop();
      await canopy?.stop();
      for (const b of backends) await b.close();
      const { Datapath } = await import('../server/src/agent/datapath.js');
      if (cg) {
        try {
          Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir }).close({ detach: true, cgroup: cg.dir });
        } catch {
          // nothing pinned
        }
        cg.cleanup();
      }
    });

    it('below capacity, connects stay in zone A', async () => {
      assert.deepEqual(await probeZones(20), { a: 20 });
    });

    it("the node's kernel connects are its offered load: past capacity the plan spills to zone B", async () => {
      load = new PacedLoad(loadConn, OFFERED_RPS, 60_000);
      eastLoad = new PacedLoad(eastConn, 5, 60_000);
      const d = await waitFor(
        'the kernel connects never showed as offered load past capacity with a spill to zone B',
        (x) => (nodeA(x)?.offeredRps ?? 0) > 2 * CAPACITY_RPS && (nodeA(x)?.weights['r1/zb/s'] ?? 0) > 0,
      );
      const n = nodeA(d)!;
      assert.ok(
        n.offeredRps < 2 * OFFERED_RPS,
        `offered ${n.offeredRps} rps from the agent's node, ~${OFFERED_RPS} sent`,
      );
      assert.deepEqual(
        d.clientNodes!.map((c) => c.path).filter((p) => p !== 'r2/zc/s'),
        ['r1/za/s'],
        'the reporter is the agent, from its own node (and the zone C workload from its own)',
      );
      assert.ok((d.landedRps?.['r1/za/s'] ?? 0) > 0, `landed per locality: ${JSON.stringify(d.landedRps)}`);
      console.log(`offered ${n.offeredRps.toFixed(1)} rps, weights ${JSON.stringify(n.weights)}`);
      // The first interval also holds the probe's burst above: its spill may reach zone C for a moment.
      const steady = await waitFor('the spill never settled on zone B alone', (x) => {
        const w = nodeA(x)?.weights ?? {};
        return w['r2/zc/s'] === undefined && (w['r1/zb/s'] ?? 0) > 0;
      });
      console.log(`then weights ${JSON.stringify(nodeA(steady)?.weights)}, landed ${JSON.stringify(steady.landedRps)}`);
    });

    it("a workload's connects are load from its own tree node (a stream of its own)", async () => {
      const d = await waitFor('the zone C workload never showed as a client node', (x) =>
        (x.clientNodes ?? []).some((c) => c.path === 'r2/zc/s' && c.offeredRps > 0),
      );
      const c = d.clientNodes!.find((x) => x.path === 'r2/zc/s')!;
      assert.ok(c.offeredRps < 20, `the workload offers about 5 rps: ${c.offeredRps}`);
      assert.ok(agent.logs.some((l) => l.msg.startsWith('load reports for the connects of a workload locality')));
    });

    it('the weighted pick in BPF follows the weights the tree carries', async () => {
      // A window with the same weights throughout (the epoch unchanged): zone A's share of the connects.
      let measured: { a: number; n: number; p: number; weights: Record<string, number> } | undefined;
      for (let attempt = 0; attempt < 5 && !measured; attempt++) {
        const before = await debugLoad();
        const t0 = Date.now();
        await sleep(4_000);
        const t1 = Date.now();
        const after = await debugLoad();
        if (after.epoch !== before.epoch) continue;
        const w = nodeA(before)!.weights;
        const total = Object.values(w).reduce((s, v) => s + v, 0);
        const z = load!.between(t0 + 300, t1);
        assert.equal(z['c'], 0, `no connect to zone C: ${JSON.stringify(z)}`);
        measured = { a: z['a']!, n: z['a']! + z['b']!, p: (w['r1/za/s'] ?? 0) / total, weights: w };
      }
      assert.ok(measured, 'the weights never held still for 4 s under a steady load');
      const { a, n, p } = measured;
      console.log(`zone A ${a}/${n} connects, weights ${JSON.stringify(measured.weights)}`);
      assert.ok(n >= 60, `${n} connects in the window`);
      assert.ok(
        p > 0.2 && p < 0.8,
        `the plan splits zone A's node between A and B: ${JSON.stringify(measured.weights)}`,
      );
      // Binomial: within 4 standard deviations (plus 2%) of the weights' share.
      const tolerance = 4 * Math.sqrt((p * (1 - p)) / n) + 0.02;
      assert.ok(
        Math.abs(a / n - p) <= tolerance,
        `zone A got ${a}/${n} = ${(a / n).toFixed(3)}, weights say ${p.toFixed(3)} ± ${tolerance.toFixed(3)}`,
      );
      assert.equal(load!.failures, 0, 'no connect failed');
      // The agent shows what it counts (and reports): connects per locality picked.
      const state = (await agent.get('/debug/state')) as {
        loadConnects: { service: string; locality: { zone: string }; connects: number }[];
      };
      const byZone = Object.fromEntries(state.loadConnects.map((c) => [c.locality.zone, c.connects]));
      assert.ok((byZone['za'] ?? 0) > 0 && (byZone['zb'] ?? 0) > 0, JSON.stringify(state.loadConnects));
      const metrics = await (await fetch(`${agent.metricsUrl}/metrics`)).text();
      assert.match(metrics, /^canopy_agent_load_connects_total\{service="echo",locality="r1\/zb\/s"\} [1-9]/m);
    });

    it('a spill target whose backends fail is skipped: health failover still works', async () => {
      const ep = (address: string) => `/api/v1/services/echo/endpoints/${encodeURIComponent(`${address}:${PORT}`)}`;
      for (const [, address] of BACKENDS.slice(2, 4))
        assert.equal((await canopy.admin('PATCH', ep(address), { health: 'unhealthy' })).status, 200);
      try {
        // Until the agent has the change (later on a busy machine): then no connect goes to zone B.
        let z = await probeZones(40);
        for (const end = Date.now() + 20_000; z['b'] !== undefined && Date.now() < end;) {
          await sleep(300);
          z = await probeZones(40);
        }
        assert.equal(z['b'], undefined, `no connect to zone B's unhealthy backends: ${JSON.stringify(z)}`);
      } finally {
        for (const [, address] of BACKENDS.slice(2, 4)) await canopy.admin('PATCH', ep(address), { health: 'healthy' });
      }
    });

    it('when the load stops, the plan returns to zone A and the connects follow', async () => {
      await load!.stop();
      await eastLoad?.stop();
      eastLoad = undefined;
      assert.equal(load!.failures, 0, 'no connect failed');
      load = undefined;
      await waitFor('the plan never returned to zone A alone', (x) => {
        const w = nodeA(x)?.weights ?? {};
        return Object.keys(w).length === 1 && (w['r1/za/s'] ?? 0) > 0;
      });
      // The agent takes the plan's tree some time after Canopy made it: probe until it has.
      let z = await probeZones(30);
      for (const end = Date.now() + 20_000; z['a'] !== 30 && Date.now() < end;) {
        await sleep(300);
        z = await probeZones(30);
      }
      assert.deepEqual(z, { a: 30 });
    });
  },
);
