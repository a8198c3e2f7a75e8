/**
 * Real Envoy 1.40 (e2e/support/envoy-process.ts), bootstrapped by `canopy bootstrap envoy`, on delta (as
 * written) and on SotW: HTTP requests sent through its outbound listener land on the backend in its own
 * locality of three; after an admin PATCH marks that backend unhealthy they move to the next-nearest within
 * the push time, and back when it recovers; the same for gRPC calls to the demo Echo service (HTTP/2
 * upstream). Envoy's /clusters and /config_dump?include_eds say the same (priority, health per host).
 * CSDS agrees with each Envoy's /config_dump, also for the one NACK provoked on purpose (a listener
 * port another process holds), and no subscription rejected anything else.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import * as grpc from '@grpc/grpc-js';
import { startBackend, type Backend } from '../server/src/demo/backend.js';
import { echoService, type WhoReply } from '../server/src/demo/echo-proto.js';
import { CsdsClient } from './support/csds-client.js';
import { EnvoyProcess, envoySkip, explainFailure } from './support/envoy-process.js';
import { failures, sendRequests, startHttpBackend, type HttpBackend } from './support/http-backends.js';

type Obj = Record<string, unknown>;
const skip = envoySkip();
const PORT = 20080;
/** The gRPC service's listener port on each Envoy. */
const GRPC_PORT = 20085;
/** A port another process holds on each Envoy's outbound address. */
const TAKEN = 20090;
const PLACES = [
  { host: '127.0.60.1', region: 'r1', zone: 'z1' },
  { host: '127.0.60.2', region: 'r1', zone: 'z2' },
  { host: '127.0.60.3', region: 'r2', zone: 'z1' },
];

const T = 'type.googleapis.com/envoy.config';
/** Envoy's /config_dump sections: type, the list, and where the resource sits in an entry. */
const DUMP: [string, string, string][] = [
  [`${T}.cluster.v3.Cluster`, 'dynamic_active_clusters', 'cluster'],
  [`${T}.listener.v3.Listener`, 'dynamic_listeners', 'active_state.listener'],
  [`${T}.route.v3.RouteConfiguration`, 'dynamic_route_configs', 'route_config'],
];

/** Envoy's own view, type → name → version_info, for the resources it holds active. */
function dumpVersions(dump: Obj): Map<string, Map<string, string>> {
  const out = new Map<string, Map<string, string>>();
  for (const [type, section, path] of DUMP) {
    const byName = new Map<string, string>();
    for (const c of dump['configs'] as Obj[])
      for (const entry of (c[section] as Obj[] | undefined) ?? []) {
        const holder = path.includes('.') ? ((entry['active_state'] as Obj | undefined) ?? {}) : entry;
        const resource = holder[path.split('.').pop()!] as Obj | undefined;
        if (resource) byName.set(String(resource['name']), String(holder['version_info']));
      }
    out.set(type, byName);
  }
  return out;
}

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
  const grpcBackends: Backend[] = [];
  const envoys: EnvoyProcess[] = [];
  const listener = (e: EnvoyProcess) => `${e === envoys[0] ? '127.0.61.1' : '127.0.61.2'}:${PORT}`;

  before(async () => {
    for (const p of PLACES) backends.push(await startHttpBackend(p.host));
    for (const [i, p] of PLACES.entries()) {
      const host = `127.0.60.${11 + i}`;
      grpcBackends.push(
        await startBackend({ id: host, host, locality: { region: p.region, zone: p.zone, subzone: 's1' } }),
      );
    }
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
        {
          name: 'echo',
          port: 50051,
          outboundPort: GRPC_PORT,
          protocol: 'grpc',
          endpoints: PLACES.map((p, i) => ({
            address: grpcBackends[i]!.address,
            port: grpcBackends[i]!.port,
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
    await Promise.all(grpcBackends.map((b) => b.stop()));
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
          await e.until(async () => (await sendRequests(listener(e), 1)).by.size === 1, 30_000, 'listener up');
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

  it('gRPC through the listener (HTTP/2 upstream): its own zone, then the next after a PATCH', () =>
    explainFailure(
      () => envoys,
      async () => {
        const Echo = echoService();
        const clients = envoys.map(
          (e) => new Echo(`${listener(e).split(':')[0]}:${GRPC_PORT}`, grpc.credentials.createInsecure()),
        );
        const who = (c: grpc.Client) =>
          new Promise<string>((resolve, reject) =>
            (c as unknown as Record<string, (...a: unknown[]) => void>)['Who']!.call(
              c,
              { caller: 'test' },
              { deadline: Date.now() + 3000 },
              (err: grpc.ServiceError | null, r?: WhoReply) => (err ? reject(err) : resolve(r!.backend_id)),
            ),
          );
        const land = async (c: grpc.Client) => {
          const got = await Promise.all(Array.from({ length: 20 }, () => who(c)));
          return [...new Set(got)];
        };
        try {
          for (const c of clients) assert.deepEqual(await land(c), ['127.0.60.11']);
          const key = `127.0.60.11:${grpcBackends[0]!.port}`;
          const r = await canopy.admin('PATCH', `/api/v1/services/echo/endpoints/${key}`, { health: 'unhealthy' });
          assert.equal(r.status, 200);
          for (const [i, c] of clients.entries())
            await envoys[i]!.until(async () => (await land(c)).join() === '127.0.60.12', 30_000, 'gRPC failover');
          await canopy.admin('PATCH', `/api/v1/services/echo/endpoints/${key}`, { health: 'healthy' });
        } finally {
          for (const c of clients) c.close();
        }
      },
    ));

  it("CSDS: Canopy's view of each Envoy agrees with the Envoy's /config_dump (versions, all acknowledged)", () =>
    explainFailure(
      () => envoys,
      async () => {
        const csds = new CsdsClient(canopy.xdsUri.replace(/^.*:\/\//, ''));
        try {
          for (const e of envoys) {
            const res = await csds.fetch({
              node_matchers: [{ node_id: { exact: e.nodeId } }],
              exclude_resource_contents: true,
            });
            assert.equal(res.config.length, 1, `${e.nodeId}: one stream`);
            const held = dumpVersions(await e.configDump());
            let compared = 0;
            for (const [type, byName] of held)
              for (const [name, version] of byName) {
                const r = res.config[0]!.generic_xds_configs.find((x) => x.type_url === type && x.name === name);
                assert.ok(r, `${e.nodeId}: CSDS lists ${type} ${name}`);
                assert.equal(r.config_status, 'SYNCED', `${e.nodeId} ${name}: ${r.config_status}`);
                assert.equal(r.client_status, 'ACKED');
                assert.equal(r.version_info, version, `${e.nodeId} ${type} ${name}: CSDS vs /config_dump`);
                compared++;
              }
            assert.ok(compared >= 3, `${e.nodeId}: compared ${compared}`);
            for (const r of res.config[0]!.generic_xds_configs)
              assert.notEqual(r.config_status, 'ERROR', `${e.nodeId} ${r.type_url} ${r.name}`);
          }
        } finally {
          csds.close();
        }
      },
    ));

  it('CSDS: a listener Envoy cannot bind (its port taken) is NACKed; CSDS and /config_dump both say so', () =>
    explainFailure(
      () => envoys,
      async () => {
        // The one rejection provoked on purpose: another process holds each Envoy's address:port.
        const blockers = await Promise.all(
          envoys.map(
            (e) =>
              new Promise<net.Server>((resolve) => {
                const s = net.createServer();
                s.listen(TAKEN, listener(e).split(':')[0], () => resolve(s));
              }),
          ),
        );
        const csds = new CsdsClient(canopy.xdsUri.replace(/^.*:\/\//, ''));
        try {
          const put = await canopy.admin('PUT', '/api/v1/services/blocked', {
            port: 8081,
            outboundPort: TAKEN,
            protocol: 'http',
            endpoints: [{ address: '127.0.60.1', port: backends[0]!.port, locality: { region: 'r1', zone: 'z1' } }],
          });
          assert.equal(put.status, 201, JSON.stringify(put.body));
          for (const e of envoys) {
            await e.until(async () => (await e.stat('listener_manager.lds.update_rejected')) === 1, 30_000, 'LDS NACK');
            const res = await csds.fetch({ node_matchers: [{ node_id: { exact: e.nodeId } }] });
            const lds = res.config[0]!.generic_xds_configs.filter((r) => r.type_url === `${T}.listener.v3.Listener`);
            const errors = lds.filter((r) => r.config_status === 'ERROR');
            assert.ok(
              errors.length > 0,
              `${e.nodeId}: CSDS shows the NACK: ${JSON.stringify(lds.map((r) => [r.name, r.config_status]))}`,
            );
            const detail = errors[0]!.error_state?.details ?? '';
            assert.match(detail, /blocked|address already in use|bind/i, detail);
            const entries = ((await e.configDump())['configs'] as Obj[]).flatMap(
              (c) => (c['dynamic_listeners'] as Obj[] | undefined) ?? [],
            );
            const failed = entries.find((l) => l['name'] === errors[0]!.name);
            assert.ok(failed?.['error_state'], `${e.nodeId}: /config_dump has the listener's error_state`);
            // Envoy keeps the listeners it had and serves on: the old one still routes.
            assert.deepEqual([...(await sendRequests(listener(e), 5)).by], [['127.0.60.1', 5]]);
          }
          assert.equal((await canopy.admin('DELETE', '/api/v1/services/blocked')).status, 204);
        } finally {
          csds.close();
          for (const b of blockers) b.close();
        }
      },
    ));

  it('no subscription rejected an update but the one provoked', () =>
    explainFailure(
      () => envoys,
      async () => {
        for (const e of envoys) {
          assert.deepEqual([...(await e.rejected())], [['listener_manager.lds.update_rejected', 1]], e.nodeId);
          assert.equal(await e.stat('control_plane.connected_state'), 1, `${e.nodeId} connected`);
        }
      },
    ));
});
