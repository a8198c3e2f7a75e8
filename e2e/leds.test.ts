/**
 * LEDS against a real `canopy serve` over raw delta ADS streams: an Envoy
 * node gets a CLA naming one endpoint collection per subzone, subscribes to
 * them, and then a health flip is one small LEDS response holding one member,
 * with no EDS response; a removal is a removed member; a reconnect re-sends
 * only what changed. Envoy on SotW, gRPC on delta and an Envoy that opted out
 * keep full CLAs. Everything Envoy is sent is decoded with its protos and
 * checked by the PGV walker.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { envoyType } from '../server/test/support/envoy-protos.js';
import { pgvCheckBytes } from '../server/test/support/pgv.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { RawAdsStream, RawDeltaStream, type RawDeltaResponse } from './support/raw-ads.js';

type Obj = Record<string, unknown>;
const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const LEDS = 'type.googleapis.com/envoy.config.endpoint.v3.LbEndpoint';
const PREFIX = 'xdstp://canopy/envoy.config.endpoint.v3.LbEndpoint/web/';
const QUIET_MS = 500;

const LOCALITIES: [string, string, string][] = [];
for (const r of ['r1', 'r2']) for (const z of ['z1', 'z2']) for (const s of ['s1', 's2']) LOCALITIES.push([r, z, s]);
const ENDPOINTS = LOCALITIES.flatMap(([region, zone, subzone], i) =>
  [1, 2].map((n) => ({ address: `127.0.${40 + i}.${n}`, port: 9000, locality: { region, zone, subzone } })),
);

function decode(typeUrl: string, value: Uint8Array): Obj {
  const name = typeUrl.slice(typeUrl.lastIndexOf('/') + 1);
  assert.deepEqual(pgvCheckBytes(name, value), [], name);
  const t = envoyType(name);
  return t.toObject(t.decode(value), { enums: String, longs: Number, arrays: true }) as Obj;
}

function members(r: RawDeltaResponse): Map<string, Obj> {
  assert.equal(r.type_url, LEDS);
  return new Map(r.resources.map((x) => [x.name, decode(LEDS, x.resource!.value)]));
}

function envoyNode(id: string, metadata: Record<string, unknown> = {}, subzone = 's1') {
  const fields = Object.fromEntries(
    Object.entries(metadata).map(([k, v]) => [
      k,
      typeof v === 'boolean' ? { boolValue: v } : { stringValue: String(v) },
    ]),
  );
  return {
    id,
    cluster: 'c',
    locality: { region: 'r1', zone: 'z1', sub_zone: subzone },
    metadata: { fields },
    user_agent_name: 'envoy',
  };
}

/** Subscribes EDS for `web` on a delta stream; returns the CLA (decoded). */
async function claOver(stream: RawDeltaStream, node: object): Promise<Obj> {
  stream.send({ node, type_url: EDS, resource_names_subscribe: ['web'] });
  const r = await stream.next(5000);
  assert.equal(r.type_url, EDS);
  stream.send({ type_url: EDS, response_nonce: r.nonce });
  return decode(EDS, r.resources[0]!.resource!.value);
}

function collectionsOf(cla: Obj): string[] {
  return (cla['endpoints'] as Obj[]).map((e) =>
    String((e['leds_cluster_locality_config'] as Obj)['leds_collection_name']),
  );
}

function hasFullEndpoints(cla: Obj): boolean {
  const entries = cla['endpoints'] as Obj[];
  return (
    entries.length > 0 &&
    entries.every((e) => (e['lb_endpoints'] as Obj[]).length > 0 && !e['leds_cluster_locality_config'])
  );
}

describe('LEDS for Envoy on delta ADS', () => {
  let canopy: CanopyProcess;
  let address: string;

  before(async () => {
    canopy = await startCanopyProcess({
      server: { debounceMs: 20 },
      services: [{ name: 'web', endpoints: ENDPOINTS }],
    });
    address = canopy.xdsUri.replace(/^.*:\/\//, '');
  });
  after(async () => {
    await canopy?.stop();
  });

  it('CLA of collections, one small LEDS response per health flip, removals, reconnect', async () => {
    const stream = new RawDeltaStream(address);
    try {
      const cla = await claOver(stream, envoyNode('leds-1'));
      assert.deepEqual((cla['policy'] as Obj)['overprovisioning_factor'], { value: 140 });
      const entries = (cla['endpoints'] as Obj[]).map((e) => ({
        locality: Object.values(e['locality'] as Obj).join('/'),
        priority: Number(e['priority'] ?? 0),
        weight: (e['load_balancing_weight'] as Obj)['value'],
        lb: (e['lb_endpoints'] as Obj[]).length,
        config: e['leds_cluster_locality_config'] as Obj,
      }));
      const expected: Record<string, number> = {
        'r1/z1/s1': 0,
        'r1/z1/s2': 1,
        'r1/z2/s1': 2,
        'r1/z2/s2': 2,
        'r2/z1/s1': 3,
        'r2/z1/s2': 3,
        'r2/z2/s1': 3,
        'r2/z2/s2': 3,
      };
      assert.deepEqual(Object.fromEntries(entries.map((e) => [e.locality, e.priority])), expected);
      for (const e of entries) {
        assert.equal(e.weight, 2);
        assert.equal(e.lb, 0);
        assert.deepEqual((e.config['leds_config'] as Obj)['ads'], {});
        assert.equal((e.config['leds_config'] as Obj)['resource_api_version'], 'V3');
        assert.equal(e.config['leds_collection_name'], `${PREFIX}${e.locality}/*`);
      }
      const globs = collectionsOf(cla);
      stream.send({ type_url: LEDS, resource_names_subscribe: globs });
      const first = await stream.next(5000);
      const got = members(first);
      assert.equal(got.size, 16);
      for (const [name, m] of got) {
        assert.equal(m['health_status'], 'HEALTHY');
        const sock = ((m['endpoint'] as Obj)['address'] as Obj)['socket_address'] as Obj;
        const l = ENDPOINTS.find((e) => e.address === sock['address'])!.locality;
        assert.equal(name, `${PREFIX}${l.region}/${l.zone}/${l.subzone}/${String(sock['address'])}:9000`);
      }
      stream.send({ type_url: LEDS, response_nonce: first.nonce });
      const held = Object.fromEntries(first.resources.map((r) => [r.name, r.version]));

      // A health flip: one LEDS response, one member, a few hundred bytes, no EDS.
      const flip = await canopy.admin('PATCH', '/api/v1/services/web/endpoints/127.0.45.2:9000', {
        health: 'unhealthy',
      });
      assert.equal(flip.status, 200, JSON.stringify(flip.body));
      const pushed = await stream.next(5000);
      const flipped = members(pushed);
      const name = `${PREFIX}r2/z1/s2/127.0.45.2:9000`;
      assert.deepEqual([...flipped.keys()], [name]);
      assert.equal(flipped.get(name)!['health_status'], 'UNHEALTHY');
      assert.deepEqual(pushed.removed_resources, []);
      const bytes = envoyType('envoy.service.discovery.v3.DeltaDiscoveryResponse')
        .encode(envoyType('envoy.service.discovery.v3.DeltaDiscoveryResponse').fromObject(pushed))
        .finish().length;
      assert.ok(bytes < 2048, `${bytes} bytes`);
      stream.send({ type_url: LEDS, response_nonce: pushed.nonce });
      assert.equal(await stream.maybeNext(QUIET_MS), undefined, 'no EDS (or any other) response');

      // A removal: the member is removed; the piece's weight changes, so the CLA does too.
      const removed = await canopy.admin('PATCH', '/api/v1/services/web/endpoints', { remove: ['127.0.40.2:9000'] });
      assert.equal(removed.status, 200, JSON.stringify(removed.body));
      const after = [await stream.next(5000), await stream.next(5000)];
      const eds = after.find((r) => r.type_url === EDS)!;
      const leds = after.find((r) => r.type_url === LEDS)!;
      assert.deepEqual(leds.removed_resources, [`${PREFIX}r1/z1/s1/127.0.40.2:9000`]);
      assert.equal(leds.resources.length, 0);
      const own = (decode(EDS, eds.resources[0]!.resource!.value)['endpoints'] as Obj[]).find(
        (e) => Number(e['priority'] ?? 0) === 0,
      )!;
      assert.deepEqual(own['load_balancing_weight'], { value: 1 });

      // Reconnect with what the first stream held: only the changed member, and the removal.
      const again = new RawDeltaStream(address);
      try {
        await claOver(again, envoyNode('leds-1b'));
        again.send({ type_url: LEDS, resource_names_subscribe: globs, initial_resource_versions: held });
        const resumed = await again.next(5000);
        assert.deepEqual([...members(resumed).keys()], [name]);
        assert.deepEqual(resumed.removed_resources, [`${PREFIX}r1/z1/s1/127.0.40.2:9000`]);
      } finally {
        again.close();
      }

      // CSDS view: one entry per glob.
      const clients = (await canopy.admin('GET', '/debug/clients')).body as {
        clients: { nodeId: string; types: { typeUrl: string; resources: { name: string }[] }[] }[];
      };
      const row = clients.clients.find((c) => c.nodeId === 'leds-1')!.types.find((t) => t.typeUrl === LEDS)!;
      assert.deepEqual(row.resources.map((r) => r.name).sort(), [...globs].sort());
    } finally {
      stream.close();
    }
  });

  it('--leds off: Envoy on delta gets full CLAs and the LEDS type is not served', async () => {
    const off = await startCanopyProcess({ services: [{ name: 'web', endpoints: ENDPOINTS }] }, ['--leds', 'off']);
    const stream = new RawDeltaStream(off.xdsUri.replace(/^.*:\/\//, ''));
    try {
      assert.ok(hasFullEndpoints(await claOver(stream, envoyNode('off-1'))));
      stream.send({ type_url: LEDS, resource_names_subscribe: [`${PREFIX}r1/z1/s1/*`] });
      assert.equal(await stream.maybeNext(QUIET_MS), undefined);
    } finally {
      stream.close();
      await off.stop();
    }
  });

  it('Envoy on SotW, gRPC on delta and an Envoy that opted out get full CLAs', async () => {
    const sotw = new RawAdsStream(address);
    const grpc = new RawDeltaStream(address);
    const optOut = new RawDeltaStream(address);
    try {
      sotw.send({ node: envoyNode('sotw-1'), type_url: EDS, resource_names: ['web'] });
      const r = await sotw.next(5000);
      assert.ok(hasFullEndpoints(decode(EDS, r.resources[0]!.value)));
      const { user_agent_name: _ua, ...grpcNode } = envoyNode('grpc-1');
      assert.ok(hasFullEndpoints(await claOver(grpc, { ...grpcNode, user_agent_name: 'grpc-node-js' })));
      assert.ok(hasFullEndpoints(await claOver(optOut, envoyNode('opt-out', { 'canopy.leds': false }))));
    } finally {
      sotw.close();
      grpc.close();
      optOut.close();
    }
  });
});
