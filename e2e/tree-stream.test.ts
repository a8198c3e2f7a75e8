/**
 * The LocalityTree type over raw ADS streams: every agent gets the same
 * bytes for the same tree version, the tree decodes against the .proto, only
 * services the kernel can intercept (IPv4 VIP and port) are in it, and a
 * removed service disappears from the full-state response.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { ServiceSpec } from '../server/src/domain/service.js';
import { startCanopy, type Canopy } from '../server/src/main.js';
import { decodeLocalityTree, intToIpv4 } from '../server/src/resources/tree-codec.js';
import { TREE_TYPE } from '../server/src/resources/type-urls.js';
import { RawAdsStream } from './support/raw-ads.js';

function svc(name: string, vip: string | undefined, health: 'healthy' | 'unhealthy' = 'healthy'): ServiceSpec {
  return {
    name,
    ...(vip ? { vip, port: 80 } : {}),
    loadBalancing: {
      mode: 'failover',
      routingPreference: ['region', 'zone', 'subzone'],
      crossNetworkFailover: false,
      overprovisioningFactor: 140,
    },
    endpoints: [
      { address: '10.0.0.1', port: 8080, locality: { region: 'r1', zone: 'z1', subzone: 's1' }, health },
      {
        address: '10.0.0.2',
        port: 8080,
        locality: { region: 'r2', zone: 'z1', subzone: 's1' },
        health: 'healthy' as const,
      },
    ].map((e) => ({ ...e, network: '', node: '', cluster: '', labels: {}, weight: 1 })),
  };
}

describe('LocalityTree over ADS', () => {
  let canopy: Canopy;
  const streams: RawAdsStream[] = [];

  before(async () => {
    canopy = await startCanopy({
      config: { services: [svc('web', '10.96.0.1'), svc('grpc-only', undefined), svc('v6', 'fd00::1')], server: {} },
      host: '127.0.0.1',
      xdsPort: 0,
      adminPort: 0,
      debounceMs: 10,
      logger: pino({ level: 'silent' }),
    });
  });

  after(async () => {
    for (const s of streams) s.close();
    await canopy.stop();
  });

  const open = (id: string, region: string) => {
    const s = new RawAdsStream(canopy.xdsAddress);
    streams.push(s);
    s.send({ type_url: TREE_TYPE, node: { id, locality: { region, zone: 'z1', sub_zone: 's1' } }, resource_names: [] });
    return s;
  };

  it('sends every agent the same bytes, whatever its locality', async () => {
    const a = open('agent-a', 'r1');
    const b = open('agent-b', 'r2');
    const [ra, rb] = await Promise.all([a.next(), b.next()]);
    assert.equal(ra.type_url, TREE_TYPE);
    assert.equal(ra.resources.length, 2, 'web and v6 have an IP VIP and a port; grpc-only has none');
    for (let i = 0; i < 2; i++)
      assert.ok(Buffer.compare(ra.resources[i]!.value, rb.resources[i]!.value) === 0, 'byte-identical trees');
    assert.equal(ra.version_info, rb.version_info);
    const trees = ra.resources.map((r) => decodeLocalityTree(r.value));
    assert.deepEqual(trees.map((x) => x.service).sort(), ['v6', 'web']);
    assert.equal(
      trees.find((x) => x.service === 'v6')!.backends.length,
      0,
      'an IPv6 service: its IPv4 backends are left out',
    );
    const t = trees.find((x) => x.service === 'web')!;
    assert.equal(`${intToIpv4(t.vip)}:${t.port}`, '10.96.0.1:80');
    assert.deepEqual(t.backends.map((x) => intToIpv4(x.ipv4)).sort(), ['10.0.0.1', '10.0.0.2']);
    for (const [s, r] of [
      [a, ra],
      [b, rb],
    ] as const)
      s.send({ type_url: TREE_TYPE, version_info: r.version_info, response_nonce: r.nonce });
  });

  it('pushes a health change as a new tree, and a removal as a response without the service', async () => {
    const [a, b] = streams;
    await canopy.store.put(svc('web', '10.96.0.1', 'unhealthy'), { owner: 'api' });
    const [ra, rb] = await Promise.all([a!.next(), b!.next()]);
    const web = (r: typeof ra) => r.resources.find((x) => decodeLocalityTree(x.value).service === 'web')!.value;
    assert.ok(Buffer.compare(web(ra), web(rb)) === 0);
    assert.deepEqual(
      decodeLocalityTree(web(ra)).backends.map((x) => intToIpv4(x.ipv4)),
      ['10.0.0.2'],
    );
    a!.send({ type_url: TREE_TYPE, version_info: ra.version_info, response_nonce: ra.nonce });
    await canopy.store.delete('web');
    const gone = await a!.next();
    assert.equal(gone.type_url, TREE_TYPE);
    assert.deepEqual(
      gone.resources.map((r) => decodeLocalityTree(r.value).service),
      ['v6'],
      'full state: a response without web removes its tree',
    );
  });
});
