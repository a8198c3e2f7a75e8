/**
 * The same traffic on SotW and LEDS over real ADS against `canopy serve`: an
 * Envoy sidecar on SotW (full CLA) and one on delta (LEDS CLA, then its
 * collections' members) in the same place get the same shares of new
 * requests per endpoint, by a model of Envoy's priority, overprovisioning and
 * locality-weight rules (server/test/support/envoy-shares.ts), for a service
 * with `unhealthy: count` (the default) and one with `park`, with one of two
 * endpoints of the nearest locality down; then after a health flip through
 * the admin API. The random-tree property is server/test/sotw-leds-shares.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { envoyType } from '../server/test/support/envoy-protos.js';
import { envoyView, shares, type EnvoyView } from '../server/test/support/envoy-shares.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { RawAdsStream, RawDeltaStream } from './support/raw-ads.js';

type Obj = Record<string, unknown>;
const T = 'type.googleapis.com/envoy.config';
const EDS = `${T}.endpoint.v3.ClusterLoadAssignment`;
const LEDS = `${T}.endpoint.v3.LbEndpoint`;

function decode(typeUrl: string, value: Uint8Array): Obj {
  const t = envoyType(typeUrl.slice(typeUrl.lastIndexOf('/') + 1));
  return t.toObject(t.decode(value), { enums: String, longs: Number, arrays: true }) as Obj;
}

const at = (region: string, zone: string) => ({ region, zone, subzone: 's1' });
const endpoints = [
  { address: '127.0.32.1', port: 8080, locality: at('r1', 'z1') },
  { address: '127.0.32.2', port: 8080, locality: at('r1', 'z1'), health: 'unhealthy' },
  { address: '127.0.32.3', port: 8080, locality: at('r1', 'z2') },
  { address: '127.0.32.4', port: 8080, locality: at('r2', 'z1'), health: 'draining' },
  { address: '127.0.32.5', port: 8080, locality: at('r2', 'z1') },
];

const node = (id: string) => ({
  id,
  locality: { region: 'r1', zone: 'z1', sub_zone: 's1' },
  user_agent_name: 'envoy',
});

async function overSotw(address: string, service: string): Promise<EnvoyView> {
  const s = new RawAdsStream(address);
  try {
    s.send({ node: node(`sotw-${service}`), type_url: EDS, resource_names: [service] });
    const r = await s.next(10_000);
    s.send({ type_url: EDS, resource_names: [service], version_info: r.version_info, response_nonce: r.nonce });
    const cla = decode(EDS, r.resources[0]!.value);
    return envoyView(cla, () => assert.fail('a SotW CLA names no collection'));
  } finally {
    s.close();
  }
}

async function overLeds(address: string, service: string): Promise<{ view: EnvoyView; collections: number }> {
  const s = new RawDeltaStream(address);
  try {
    s.send({ node: node(`leds-${service}`), type_url: EDS, resource_names_subscribe: [service] });
    const r = await s.next(10_000);
    s.send({ type_url: EDS, response_nonce: r.nonce });
    const cla = decode(EDS, r.resources[0]!.resource!.value);
    const globs = ((cla['endpoints'] as Obj[] | undefined) ?? []).flatMap((g) => {
      const leds = g['leds_cluster_locality_config'] as Obj | undefined;
      return leds ? [String(leds['leds_collection_name'])] : [];
    });
    const members = new Map<string, Obj[]>();
    if (globs.length > 0) {
      s.send({ type_url: LEDS, resource_names_subscribe: globs });
      const m = await s.next(10_000);
      s.send({ type_url: LEDS, response_nonce: m.nonce });
      for (const a of m.resources) {
        const glob = `${a.name.slice(0, a.name.lastIndexOf('/'))}/*`;
        members.set(glob, [...(members.get(glob) ?? []), decode(LEDS, a.resource!.value)]);
      }
    }
    return { view: envoyView(cla, (glob) => members.get(glob) ?? []), collections: globs.length };
  } finally {
    s.close();
  }
}

function assertSame(a: EnvoyView, b: EnvoyView, what: string): Map<string, number> {
  const x = shares(a, 140, 'unhealthy');
  const y = shares(b, 140, 'unhealthy');
  assert.deepEqual(x.panic, y.panic, `${what}: panic`);
  for (const k of new Set([...x.shares.keys(), ...y.shares.keys()]))
    assert.ok(
      Math.abs((x.shares.get(k) ?? 0) - (y.shares.get(k) ?? 0)) < 1e-9,
      `${what}: ${k} gets ${x.shares.get(k)} on SotW, ${y.shares.get(k)} on LEDS`,
    );
  return x.shares;
}

describe('the same traffic on SotW and LEDS, over ADS', () => {
  let canopy: CanopyProcess;
  let address: string;
  const lb = { mode: 'failover', routingPreference: ['region', 'zone', 'subzone'] };

  before(async () => {
    canopy = await startCanopyProcess({
      server: { debounceMs: 20 },
      services: [
        { name: 'counted', port: 8080, loadBalancing: lb, endpoints },
        { name: 'parked', port: 8081, unhealthy: 'park', loadBalancing: lb, endpoints },
      ],
    });
    address = canopy.xdsUri.replace(/^.*:\/\//, '');
  });
  after(async () => {
    await canopy?.stop();
  });

  it('count (the default): the same shares, 30% spilled from a priority with one of two down', async () => {
    const sotw = await overSotw(address, 'counted');
    const leds = await overLeds(address, 'counted');
    assert.ok(leds.collections > 0, 'the delta sidecar takes LEDS');
    const s = assertSame(sotw, leds.view, 'count');
    assert.ok(
      Math.abs(s.get('127.0.32.1:8080')! - 0.7) < 1e-9,
      `the nearest healthy endpoint: ${s.get('127.0.32.1:8080')}`,
    );
  });

  it('park: the same shares, the priority keeps its traffic while one endpoint is up', async () => {
    const sotw = await overSotw(address, 'parked');
    const leds = await overLeds(address, 'parked');
    assert.equal(leds.collections, 0, 'a park service is sent the full CLA on delta too');
    const s = assertSame(sotw, leds.view, 'park');
    assert.ok(Math.abs(s.get('127.0.32.1:8080')! - 1) < 1e-9);
  });

  it('after a health flip through the admin API, still the same on both', async () => {
    for (const service of ['counted', 'parked']) {
      const r = await canopy.admin('PATCH', `/api/v1/services/${service}/endpoints/127.0.32.2:8080`, {
        health: 'healthy',
      });
      assert.equal(r.status, 200);
    }
    for (const service of ['counted', 'parked']) {
      const s = assertSame(await overSotw(address, service), (await overLeds(address, service)).view, service);
      assert.ok(Math.abs(s.get('127.0.32.1:8080')! - 0.5) < 1e-9, `${service}: two healthy near endpoints share`);
    }
  });
});
