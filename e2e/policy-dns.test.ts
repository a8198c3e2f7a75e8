/**
 * Hostname endpoints the way users meet them (issue 22 item 6): `canopy
 * serve --config` with a Canopy service whose endpoints are the hostname
 * `localhost` (two real gRPC backends on 127.0.0.1, one per zone), and Istio
 * ServiceEntries with `resolution: DNS` (hostname endpoints, and a host that
 * is its own endpoint), served directly and through `canopy import istio`.
 * Real proxyless clients (@grpc/grpc-js-xds) resolve the names themselves and
 * keep to their zone; an emulated Envoy (e2e/support/envoy-peer.ts) gets
 * STRICT_DNS clusters, warm without a CLA, whose load_assignment carries its
 * priorities; a node agent refuses the service for the kernel with the reason
 * (when the machine can run the kernel datapath).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startBackend, type Backend } from '../server/src/demo/backend.js';
import { xdsBootstrap } from '../server/src/demo/bootstrap.js';
import { formatTally, XdsEchoClient, type Tally } from '../server/src/demo/xds-client.js';
import type { Locality } from '../server/src/domain/locality.js';
import { Datapath } from '../server/src/agent/datapath.js';
import { startAgentProcess } from './support/agent-process.js';
import { runCanopyCli } from './support/canopy-cli.js';
import { CCoreClient, ccoreMissing } from './support/ccore-client.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { CDS, EDS, EnvoyPeer } from './support/envoy-peer.js';
import { kernelEnv, testCgroup } from './support/kernel.js';
import { RawAdsStream } from './support/raw-ads.js';
import { envoyType } from '../server/test/support/envoy-protos.js';
import { pgvCheckBytes } from '../server/test/support/pgv.js';

type Obj = Record<string, unknown>;

const only = (ids: string[]) => (t: Tally) =>
  t.failures === 0 && [...t.byBackend.keys()].every((id) => ids.includes(id)) && ids.every((id) => t.byBackend.has(id));
const zone = (z: string): Locality => ({ region: 'r1', zone: z, subzone: '' });

describe('hostname endpoints through canopy serve, with real clients', () => {
  const backends = new Map<string, Backend>();
  const clients: XdsEchoClient[] = [];
  const peers: EnvoyPeer[] = [];
  const servers: CanopyProcess[] = [];
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-dns-'));
  let canopy: CanopyProcess;

  const b = (id: string) => backends.get(id)!;
  const client = (server: CanopyProcess, target: string, at: Locality) => {
    const c = new XdsEchoClient({
      target: `xds:///${target}`,
      bootstrap: xdsBootstrap({ serverUri: server.xdsUri, nodeId: `dns-client-${clients.length}`, locality: at }),
    });
    clients.push(c);
    return c;
  };

  /** Istio documents: a DNS ServiceEntry with two hostname endpoints, and a host resolved itself. */
  const istio = () => `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: { name: dns-se }
spec:
  host: dns-se
  trafficPolicy: { outlierDetection: { consecutive5xxErrors: 5 } }
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: { name: dns-se }
spec:
  hosts: [dns-se]
  ports: [{ number: 9080, name: grpc }]
  resolution: DNS
  endpoints:
    - { address: localhost, ports: { grpc: ${b('za').port} }, locality: r1/za }
    - { address: localhost, ports: { grpc: ${b('zb').port} }, locality: r1/zb }
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: { name: self }
spec:
  hosts: [localhost]
  ports: [{ number: ${b('za').port}, name: grpc }]
  resolution: DNS
`;

  before(async () => {
    backends.set('za', await startBackend({ id: 'za', host: '127.0.0.1', locality: zone('za') }));
    backends.set('zb', await startBackend({ id: 'zb', host: '127.0.0.1', locality: zone('zb') }));
    const own = `server: { debounceMs: 20 }
services:
  - name: ext
    loadBalancing: { mode: failover, routingPreference: [region, zone] }
    endpoints:
      - { address: localhost, port: ${b('za').port}, locality: { region: r1, zone: za } }
      - { address: LOCALHOST., port: ${b('zb').port}, locality: { region: r1, zone: zb } }
`;
    canopy = await startCanopyProcess(`${own}---\n${istio()}`);
    servers.push(canopy);
  });
  after(async () => {
    for (const c of clients) c.close();
    for (const p of peers) p.close();
    for (const s of servers) await s.stop();
    await Promise.all([...backends.values()].map((x) => x.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('a Canopy service with hostname endpoints: each proxyless client stays in its zone, and fails over', async () => {
    const a = client(canopy, 'ext', zone('za'));
    const bz = client(canopy, 'ext', zone('zb'));
    await a.waitUntil(only(['za']));
    await bz.waitUntil(only(['zb']));
    assert.ok(only(['za'])(await a.tally(20)));
    assert.ok(only(['zb'])(await bz.tally(20)));
    // The endpoint's key is its hostname and port, as written (in one spelling).
    const r = await canopy.admin(
      'PATCH',
      `/api/v1/services/ext/endpoints/${encodeURIComponent(`localhost:${b('za').port}`)}`,
      { health: 'unhealthy' },
    );
    assert.equal(r.status, 200, JSON.stringify(r.body));
    await a.waitUntil(only(['zb']));
  });

  it(
    'gRPC C-core (python3-grpcio) reads the same LOGICAL_DNS aggregate and stays in its zone',
    { skip: ccoreMissing() },
    async () => {
      const c = new CCoreClient(
        'xds:///ext',
        xdsBootstrap({ serverUri: canopy.xdsUri, nodeId: 'dns-ccore', locality: zone('zb') }),
      );
      try {
        await c.ready();
        await c.waitUntil(only(['zb']));
        assert.ok(only(['zb'])(await c.tally(20)));
      } finally {
        await c.close();
      }
    },
  );

  it('Istio ServiceEntry resolution DNS, served as written: hostname endpoints by zone, and a host that is its own endpoint', async () => {
    const a = client(canopy, 'dns-se', zone('za'));
    const bz = client(canopy, 'dns-se', zone('zb'));
    await a.waitUntil(only(['za']));
    await bz.waitUntil(only(['zb']));
    assert.ok(only(['za'])(await a.tally(20)));
    const self = client(canopy, 'localhost', zone('zb'));
    await self.waitUntil(only(['za']));
    assert.ok(
      canopy.logs().some((l) => l.includes('STRICT_DNS') && l.includes('gRFC A37')),
      'the import note is printed',
    );
  });

  it('an Envoy sidecar gets STRICT_DNS clusters with its own priorities inside, warm with no CLA', async () => {
    const node = {
      id: 'dns-envoy',
      cluster: 'test',
      locality: { region: 'r1', zone: 'zb', sub_zone: '' },
      user_agent_name: 'envoy',
      metadata: { fields: { 'canopy.outbound_address': { stringValue: '127.0.0.1' } } },
    };
    const peer = new EnvoyPeer(canopy.xdsUri.replace(/^.*:\/\//, ''), { node, protocol: 'sotw' });
    peers.push(peer);
    peer.start();
    await peer.until(() => peer.clusters.has('dns-se') && peer.warming.size === 0, 6000, 'CDS, warm');
    await new Promise((r) => setTimeout(r, 300));
    assert.ok(!peer.received.some((r) => r.typeUrl === EDS && r.names.includes('dns-se')), 'no CLA is sent for it');
    // Read the cluster again over a raw stream: the bytes as Envoy decodes them.
    const raw = new RawAdsStream(canopy.xdsUri.replace(/^.*:\/\//, ''));
    try {
      raw.send({ node, type_url: CDS, resource_names: [] });
      const res = await raw.next(5000);
      const any = res.resources.find((x) => {
        const t = envoyType('envoy.config.cluster.v3.Cluster');
        return (t.decode(x.value) as unknown as { name: string }).name === 'dns-se';
      });
      assert.ok(any);
      assert.deepEqual(pgvCheckBytes('envoy.config.cluster.v3.Cluster', any.value), []);
      const t = envoyType('envoy.config.cluster.v3.Cluster');
      const c = t.toObject(t.decode(any.value), { enums: String, longs: Number, arrays: true }) as Obj;
      assert.equal(c['type'], 'STRICT_DNS');
      assert.equal(c['respect_dns_ttl'], true);
      assert.equal(c['dns_lookup_family'], 'V4_PREFERRED');
      const groups = ((c['load_assignment'] as Obj)['endpoints'] as Obj[]).map((g) => [
        (g['locality'] as Obj)['zone'],
        g['priority'] ?? 0,
      ]);
      assert.deepEqual(
        groups.sort((x, y) => Number(x[1]) - Number(y[1])),
        [
          ['zb', 0],
          ['za', 1],
        ],
      );
    } finally {
      raw.close();
    }
  });

  it('canopy import istio of the same documents serves the same through serve --config', async () => {
    const file = path.join(dir, 'istio.yaml');
    writeFileSync(file, istio());
    const imported = await runCanopyCli(['import', 'istio', file]);
    assert.equal(imported.code, 0, imported.stderr);
    assert.match(imported.stdout, /address: localhost/);
    assert.match(imported.stdout, /resolution: strict/);
    const second = await startCanopyProcess(
      `server: { debounceMs: 20 }\n${imported.stdout.replace(/^server:.*$/m, '')}`,
    );
    servers.push(second);
    const bz = client(second, 'dns-se', zone('zb'));
    await bz.waitUntil(only(['zb']));
    assert.ok(only(['zb'])(await bz.tally(20)), formatTally(await bz.tally(5)));
  });

  it('the clients NACKed nothing they were sent', async () => {
    const metrics = await fetch(`${canopy.adminUrl}/metrics`).then((r) => r.text());
    assert.match(metrics, /canopy_xds_acks_total\{type="CDS"\} [1-9]/);
    assert.doesNotMatch(metrics, /canopy_xds_nacks_total\{[^}]*\} [1-9]/);
  });
});

const env = kernelEnv();

describe('hostname endpoints and the kernel datapath: refused with the reason', { skip: env.reason }, () => {
  it('the server warns, the agent NACKs the service naming why, and /debug/state shows it', async () => {
    const cg = testCgroup('dns');
    const canopy = await startCanopyProcess({
      server: { debounceMs: 20 },
      services: [
        {
          name: 'dns-kernel',
          vip: '127.100.22.6',
          port: 8081,
          endpoints: [{ address: 'localhost', port: 8081, locality: { region: 'r1', zone: 'z1' } }],
        },
      ],
    });
    const agent = await startAgentProcess([
      '--server',
      canopy.xdsUri,
      '--node-id',
      'dns-node',
      '--region',
      'r1',
      '--zone',
      'z1',
      '--cgroup',
      cg.dir,
      '--pin-dir',
      cg.pinDir,
      '--grace-ms',
      '100',
    ]);
    try {
      const nack = await agent.waitForLog(
        (l) => /rejected/.test(l.msg) && /hostname endpoints/.test(String(l['detail'])),
      );
      assert.match(String(nack['detail']), /dns-kernel.*refused: hostname endpoints/);
      const state = (await agent.get('/debug/state')) as { lastNack?: { detail: string }; services: unknown[] };
      assert.match(state.lastNack?.detail ?? '', /refused: hostname endpoints/);
      assert.deepEqual(state.services, []);
      assert.ok(canopy.logs().some((l) => l.includes('cannot carry hostname endpoints')));
    } finally {
      await agent.stop();
      await canopy.stop();
      try {
        Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir }).close({ detach: true, cgroup: cg.dir });
      } catch {
        // nothing pinned
      }
      cg.cleanup();
    }
  });
});
