/**
 * The split a real Envoy 1.40 makes agrees with `canopy explain`: three Envoys in r1/z1, bootstrapped by
 * `canopy bootstrap envoy` — SotW, delta with full CLAs (`canopy.leds: false`) and delta with LEDS (as
 * written) — each send 2,000 HTTP requests through their listener per case, and the count per backend is
 * within a binomial 4-sigma bound (plus one request) of what `canopy explain --json` says an Envoy there
 * gets (server/src/domain/envoy-lb.ts). Cases: a draining endpoint from the start (Envoy would exclude a
 * DRAINING host it first sees, so Canopy sends UNHEALTHY), spill from a priority under 1/factor healthy,
 * `park`, every priority in panic (Envoy sends to unhealthy hosts), locality weights scaled by
 * availability within one priority, per-endpoint weights (`load_balancing_weight`: locality weights are
 * their sums, hosts split by weight within a locality), and the spill case again with gRPC backends (the
 * demo Echo service, HTTP/2 upstream) and gRPC calls through the listener.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runCanopyCli } from './support/canopy-cli.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { EnvoyProcess, envoySkip, explainFailure } from './support/envoy-process.js';
import { failures, sendRequests, startHttpBackend, type HttpBackend, type Tally } from './support/http-backends.js';
import { startBackend, type Backend } from '../server/src/demo/backend.js';
import { DirectEchoClient } from './support/paced-echo.js';

const skip = envoySkip();
const PORT = 20081;
const N = 2000;
const HOSTS: [string, string, string][] = [
  ['127.0.64.1', 'r1', 'z1'],
  ['127.0.64.2', 'r1', 'z1'],
  ['127.0.64.3', 'r1', 'z1'],
  ['127.0.64.4', 'r1', 'z2'],
  ['127.0.64.5', 'r2', 'z1'],
  ['127.0.64.6', 'r2', 'z1'],
];
const ENVOYS: [string, string, object][] = [
  ['shares-sotw', '127.0.65.1', { ads: 'sotw' }],
  ['shares-delta', '127.0.65.2', { metadata: { 'canopy.leds': 'false' } }],
  ['shares-leds', '127.0.65.3', {}],
];
/** What Envoy holds for each: a draining endpoint in a counted priority is sent UNHEALTHY. */
const EDS_STATUS: Record<string, string> = { healthy: 'HEALTHY', unhealthy: 'UNHEALTHY', draining: 'UNHEALTHY' };

interface Case {
  readonly title: string;
  /** Health per host, in HOSTS order (h healthy, u unhealthy, d draining). */
  readonly health: string;
  readonly unhealthy?: 'count' | 'park';
  readonly routingPreference?: string[];
  /** Per-endpoint weights in HOSTS order (1 when absent). */
  readonly weights?: number[];
  /** `grpc`: the demo Echo backends (HTTP/2 upstream) and gRPC calls through the listener. */
  readonly protocol?: 'grpc';
  /** Requests per Envoy (N when absent). */
  readonly n?: number;
  /** What the case is about, checked on explain's answer before any traffic. */
  readonly expect: (shares: Record<string, number>) => void;
}

const near = (s: Record<string, number>, host: string) =>
  Object.entries(s).find(([k]) => k.startsWith(`${host}:`))?.[1] ?? 0;

const CASES: Case[] = [
  {
    title: 'a draining endpoint counts as unhealthy in its priority (sent UNHEALTHY): 2 of 3 keep 93%',
    health: 'hdhhhh',
    expect: (s) => assert.ok(Math.abs(near(s, '127.0.64.1') - 0.465) < 1e-9),
  },
  {
    title: 'count: 1 of 3 healthy in p0 spills 54% on (health 46%)',
    health: 'huuhhh',
    expect: (s) => assert.ok(Math.abs(near(s, '127.0.64.1') - 0.46) < 1e-9),
  },
  {
    title: 'park: the priority keeps everything while one host is up',
    health: 'huuhhh',
    unhealthy: 'park',
    expect: (s) => assert.equal(near(s, '127.0.64.1'), 1),
  },
  {
    title: 'every priority in panic: load by host count, unhealthy hosts included',
    health: 'huuuuu',
    expect: (s) => assert.ok(near(s, '127.0.64.4') > 0.15, 'the unhealthy p1 host gets its 16%'),
  },
  {
    title: 'region scope: locality weights scaled by availability within p0',
    health: 'huhhhh',
    routingPreference: ['region'],
    expect: (s) => assert.ok(near(s, '127.0.64.4') > 0.25 && near(s, '127.0.64.4') < 0.27),
  },
  {
    title: 'per-endpoint weights: locality weight is their sum, hosts split by weight (6:2, then 4:1:1)',
    health: 'hhhhhh',
    routingPreference: ['region'],
    weights: [4, 1, 1, 2, 1, 1],
    // Envoy's weighted round robin is exact with every host healthy: fewer requests tell as much.
    n: 1000,
    expect: (s) =>
      assert.ok(Math.abs(near(s, '127.0.64.1') - 0.5) < 1e-9 && Math.abs(near(s, '127.0.64.4') - 0.25) < 1e-9),
  },
  {
    title: 'gRPC backends and calls: 1 of 3 healthy in p0 spills 54% on',
    health: 'huuhhh',
    protocol: 'grpc',
    expect: (s) => assert.ok(Math.abs(near(s, '127.0.64.1') - 0.46) < 1e-9),
  },
];

/** `n` unary Who calls through an Envoy's listener, `concurrency` in flight, counted by backend id. */
async function sendCalls(target: string, n: number, concurrency: number): Promise<Tally> {
  const client = new DirectEchoClient(target);
  const by = new Map<string, number>();
  const failed = new Map<string, number>();
  let sent = 0;
  const worker = async () => {
    while (sent < n) {
      sent++;
      try {
        const id = (await client.who(30_000)).backend_id;
        by.set(id, (by.get(id) ?? 0) + 1);
      } catch (err) {
        const m = (err as Error).message.slice(0, 140);
        failed.set(m, (failed.get(m) ?? 0) + 1);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  client.close();
  return { by, failed, sent };
}

describe('real Envoy: the split it makes is what canopy explain says', { skip }, () => {
  let canopy: CanopyProcess;
  const backends: HttpBackend[] = [];
  const grpcBackends: Backend[] = [];
  const envoys: EnvoyProcess[] = [];

  before(async () => {
    for (const [h, region, zone] of HOSTS) {
      backends.push(await startHttpBackend(h));
      grpcBackends.push(await startBackend({ id: h, host: h, locality: { region, zone, subzone: 's1' } }));
    }
    canopy = await startCanopyProcess({ server: { debounceMs: 20 }, services: [service(CASES[0]!)] });
    const xds = canopy.xdsUri.replace(/^.*:\/\//, '');
    for (const [nodeId, outboundAddress, extra] of ENVOYS)
      envoys.push(
        await EnvoyProcess.start({
          xds,
          nodeId,
          outboundAddress,
          locality: { region: 'r1', zone: 'z1', subzone: 's1' },
          ...extra,
        }),
      );
  });
  after(async () => {
    await Promise.all(envoys.map((e) => e.stop()));
    await canopy?.stop();
    await Promise.all(backends.map((b) => b.close()));
    await Promise.all(grpcBackends.map((b) => b.stop()));
  });

  const portOf = (c: Case, i: number) => (c.protocol === 'grpc' ? grpcBackends[i]! : backends[i]!).port;

  function service(c: Case): object {
    return {
      name: 'web',
      port: 8080,
      outboundPort: PORT,
      protocol: c.protocol ?? 'http',
      unhealthy: c.unhealthy ?? 'count',
      loadBalancing: { mode: 'failover', routingPreference: c.routingPreference ?? ['region', 'zone', 'subzone'] },
      endpoints: HOSTS.map(([address, region, zone], i) => ({
        address,
        port: portOf(c, i),
        locality: { region, zone, subzone: 's1' },
        ...(c.weights ? { weight: c.weights[i] } : {}),
        health: { h: 'healthy', u: 'unhealthy', d: 'draining' }[c.health[i]!],
      })),
    };
  }

  async function explainShares(): Promise<Record<string, number>> {
    const r = await runCanopyCli([
      'explain',
      '--admin',
      canopy.adminUrl,
      '--service',
      'web',
      '--region',
      'r1',
      '--zone',
      'z1',
      '--subzone',
      's1',
      '--json',
    ]);
    assert.equal(r.code, 0, r.stderr);
    return (JSON.parse(r.stdout) as { envoy: { shares: Record<string, number> } }).envoy.shares;
  }

  /** Every host in Envoy's /clusters with the EDS health the case gives it. */
  async function caught(e: EnvoyProcess, c: Case): Promise<boolean> {
    const hosts = (await e.clusters()).find((x) => x.name === 'web')?.hosts ?? [];
    return HOSTS.every(([h], i) =>
      hosts.some(
        (x) =>
          x.address === `${h}:${portOf(c, i)}` &&
          x.weight === (c.weights?.[i] ?? 1) &&
          x.edsHealth === EDS_STATUS[{ h: 'healthy', u: 'unhealthy', d: 'draining' }[c.health[i]!]!],
      ),
    );
  }

  for (const c of CASES) {
    it(c.title, () =>
      explainFailure(
        () => envoys,
        async () => {
          const put = await canopy.admin('PUT', '/api/v1/services/web', service(c));
          assert.equal(put.status, 200, JSON.stringify(put.body));
          const expected = await explainShares();
          c.expect(expected);
          for (const e of envoys) await e.until(() => caught(e, c), 30_000, `${c.title}: the health states`);
          // The CLA (priorities) and LEDS members may come in separate responses: let both land.
          await new Promise((r) => setTimeout(r, 300));
          const n = c.n ?? N;
          const tallies = await Promise.all(
            envoys.map((_, i) =>
              c.protocol === 'grpc'
                ? sendCalls(`${ENVOYS[i]![1]}:${PORT}`, n, 6)
                : sendRequests(`${ENVOYS[i]![1]}:${PORT}`, n, { concurrency: 6 }),
            ),
          );
          const report: string[] = [];
          tallies.forEach((t, i) => {
            assert.equal(failures(t), 0, `${envoys[i]!.nodeId}: ${JSON.stringify([...t.failed])}`);
            assert.equal(t.sent, n);
            for (const [h] of HOSTS) {
              const p = near(expected, h);
              const got = t.by.get(h) ?? 0;
              const bound = 4 * Math.sqrt(n * p * (1 - p)) + 1;
              report.push(
                `${envoys[i]!.nodeId} ${h}: ${got} of ${n}, explain ${(p * n).toFixed(0)} ± ${bound.toFixed(0)}`,
              );
              assert.ok(Math.abs(got - n * p) <= bound, report.join('\n'));
            }
          });
          console.log(`# ${c.title}\n${report.map((l) => `#   ${l}`).join('\n')}`);
        },
      ),
    );
  }

  it('no subscription rejected an update', () =>
    explainFailure(
      () => envoys,
      async () => {
        for (const e of envoys) assert.deepEqual([...(await e.rejected())], [], e.nodeId);
      },
    ));
});
