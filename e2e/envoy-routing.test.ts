/**
 * Real Envoy 1.40 (e2e/support/envoy-process.ts), bootstrapped by `canopy bootstrap envoy`, on delta (as
 * written) and on SotW: HTTP requests sent through its outbound listener land on the backend in its own
 * locality of three; after an admin PATCH marks that backend unhealthy they move to the next-nearest within
 * the push time, and back when it recovers. Envoy's /clusters and /config_dump?include_eds say the same
 * (priority, health per host), and no subscription rejected an update.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { EnvoyProcess, envoySkip, explainFailure } from './support/envoy-process.js';
import { failures, sendRequests, startHttpBackend, type HttpBackend } from './support/http-backends.js';

type Obj = Record<string, unknown>;
const skip = envoySkip();
const PORT = 20080;
const PLACES = [
  { host: '127.0.60.1', region: 'r1', zone: 'z1' },
  { host: '127.0.60.2', region: 'r1', zone: 'z2' },
  { host: '127.0.60.3', region: 'r2', zone: 'z1' },
];

/** Where each CLA host sits in /config_dump?include_eds: address → [priority, health_status]. */
function edsHosts(dump: Obj, cluster: string): Map<string, [number, string]> {
  const out = new Map<string, [number, string]>();
  for (const c of dump['configs'] as Obj[]) {
    for (const d of (c['dynamic_endpoint_configs'] as Obj[] | undefined) ?? []) {
      const cla = d['endpoint_config'] as Obj;
      if (cla['cluster_name'] !== cluster) continue;
      for (const g of (cla['endpoints'] as Obj[] | undefined) ?? [])
        for (const e of (g['lb_endpoints'] as Obj[] | undefined) ?? []) {
          const sock = ((e['endpoint'] as Obj)['address'] as Obj)['socket_address'] as Obj;
          out.set(String(sock['address']), [Number(g['priority'] ?? 0), String(e['health_status'] ?? 'UNKNOWN')]);
        }
    }
  }
  return out;
}

describe('real Envoy: requests land in the nearest healthy locality', { skip }, () => {
  let canopy: CanopyProcess;
  const backends: HttpBackend[] = [];
  const envoys: EnvoyProcess[] = [];
  const listener = (e: EnvoyProcess) => `${e === envoys[0] ? '127.0.61.1' : '127.0.61.2'}:${PORT}`;

  before(async () => {
    for (const p of PLACES) backends.push(await startHttpBackend(p.host));
    canopy = await startCanopyProcess({
      server: { debounceMs: 20 },
      services: [
        {
          name: 'web',
          port: 8080,
          outboundPort: PORT,
          protocol: 'http',
          endpoints: PLACES.map((p, i) => ({
            address: p.host,
            port: backends[i]!.port,
            locality: { region: p.region, zone: p.zone, subzone: 's1' },
          })),
        },
      ],
    });
    const xds = canopy.xdsUri.replace(/^.*:\/\//, '');
    const locality = { region: 'r1', zone: 'z1', subzone: 's1' };
    envoys.push(
      await EnvoyProcess.start({ xds, nodeId: 'route-delta', locality, outboundAddress: '127.0.61.1' }),
      await EnvoyProcess.start({ xds, nodeId: 'route-sotw', locality, outboundAddress: '127.0.61.2', ads: 'sotw' }),
    );
  });
  after(async () => {
    await Promise.all(envoys.map((e) => e.stop()));
    await canopy?.stop();
    await Promise.all(backends.map((b) => b.close()));
  });

  const landsOn = async (e: EnvoyProcess, id: string, ms: number): Promise<number> =>
    e.until(
      async () => {
        const t = await sendRequests(listener(e), 20, { concurrency: 2 });
        return t.by.get(id) === 20;
      },
      ms,
      `every request on ${id}`,
    );

  it('before any change: every request on the backend in its own zone', () =>
    explainFailure(
      () => envoys,
      async () => {
        for (const e of envoys) {
          await e.until(async () => (await sendRequests(listener(e), 1)).by.size === 1, 10_000, 'listener up');
          const t = await sendRequests(listener(e), 200);
          assert.equal(failures(t), 0, JSON.stringify([...t.failed]));
          assert.deepEqual([...t.by], [['127.0.60.1', 200]], e.nodeId);
          const hosts = (await e.clusters()).find((c) => c.name === 'web')!.hosts;
          const near = hosts.find((h) => h.address.startsWith('127.0.60.1:'))!;
          assert.equal(near.priority, 0);
          assert.equal(near.locality, 'r1/z1/s1');
          assert.ok(near.rqTotal >= 200, `rq_total ${near.rqTotal}`);
          assert.equal(hosts.find((h) => h.address.startsWith('127.0.60.2:'))!.priority, 1);
          assert.equal(hosts.find((h) => h.address.startsWith('127.0.60.3:'))!.priority, 2);
        }
      },
    ));

  it('a health PATCH moves them to the next zone within the push time, and back', () =>
    explainFailure(
      () => envoys,
      async () => {
        const key = `127.0.60.1:${backends[0]!.port}`;
        const patch = async (health: string) => {
          const r = await canopy.admin('PATCH', `/api/v1/services/web/endpoints/${key}`, { health });
          assert.equal(r.status, 200, JSON.stringify(r.body));
        };
        await patch('unhealthy');
        for (const e of envoys) {
          const ms = await landsOn(e, '127.0.60.2', 3000);
          console.log(`# ${e.nodeId}: failover seen by requests ${ms} ms after the PATCH answered`);
          const hosts = (await e.clusters()).find((c) => c.name === 'web')!.hosts;
          const near = hosts.find((h) => h.address === key)!;
          assert.equal(near.healthy, false);
          assert.equal(near.edsHealth, 'UNHEALTHY');
          // On delta the endpoints came over LEDS, which /config_dump lists under the cluster's collections.
          if (e.nodeId === 'route-sotw') {
            const eds = edsHosts(await e.configDump({ includeEds: true }), 'web');
            assert.deepEqual(eds.get('127.0.60.1'), [0, 'UNHEALTHY']);
            assert.deepEqual(eds.get('127.0.60.2'), [1, 'HEALTHY']);
          }
        }
        await patch('healthy');
        for (const e of envoys) await landsOn(e, '127.0.60.1', 3000);
      },
    ));

  it('no subscription rejected an update', () =>
    explainFailure(
      () => envoys,
      async () => {
        for (const e of envoys) {
          assert.deepEqual([...(await e.rejected())], [], e.nodeId);
          assert.equal(await e.stat('control_plane.connected_state'), 1, `${e.nodeId} connected`);
        }
      },
    ));
});
