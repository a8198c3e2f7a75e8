/**
 * A rejected response never strands a client (issue 40 §2, §3), with real proxyless gRPC clients
 * (@grpc/grpc-js-xds, SotW): an ADS relay between them and Canopy gives every endpoint of service
 * `oops` an address grpc-js refuses (`not-an-ip`), so its EDS update is NACKed.
 * - A client that held `oops` before keeps calling its last acknowledged backend; a client that
 *   connects during the bad state gets no `oops` backend; `good` serves both fully all along.
 * - The NACK is logged naming the client, `oops` and grpc-js's error.
 * - Once `oops` is clean both clients converge on it, and a later change to `good` reaches both.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startBackend, type Backend } from '../server/src/demo/backend.js';
import { xdsBootstrap } from '../server/src/demo/bootstrap.js';
import { XdsEchoClient, type Tally } from '../server/src/demo/xds-client.js';
import { startAdsRelay, type AdsRelay } from './support/ads-relay.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';

const locality = { region: 'r1', zone: 'z1', subzone: 's1' };
const HOSTS: Record<string, string> = { g1: '127.0.93.1', g2: '127.0.93.2', o1: '127.0.94.1', o2: '127.0.94.2' };

/** Every request served, by exactly the backends `ids`. */
const servedBy = (ids: string[]) => (t: Tally) =>
  t.failures === 0 && t.byBackend.size === ids.length && ids.every((id) => t.byBackend.has(id));

describe('grpc-js clients: a NACK never strands a client', () => {
  const backends = new Map<string, Backend>();
  let canopy: CanopyProcess;
  let relay: AdsRelay;
  /**
   * The clients reach the relay through a TCP proxy that closes their connections at the end:
   * grpc-js-xds keeps a channel's ADS connection open after the channel closes, which would keep an
   * in-process relay, and so this test, from ending.
   */
  let proxy: TcpProxy;
  const clients: XdsEchoClient[] = [];
  const spec = (name: string, ids: string[]) => ({
    name,
    loadBalancing: { mode: 'random', routingPreference: ['zone'] },
    endpoints: ids.map((id) => ({ address: backends.get(id)!.address, port: backends.get(id)!.port, locality })),
  });
  const put = async (name: string, ids: string[]) => {
    const r = await canopy.admin('PUT', `/api/v1/services/${name}`, spec(name, ids));
    assert.ok(r.status === 200 || r.status === 201, JSON.stringify(r.body));
  };
  /** One ADS stream per channel (grpc-js-xds's per-channel bootstrap). */
  const client = (node: string, service: string) => {
    const c = new XdsEchoClient({
      target: `xds:///${service}`,
      bootstrap: xdsBootstrap({ serverUri: proxy.address, nodeId: node, locality }),
    });
    clients.push(c);
    return c;
  };
  let before1: { good: XdsEchoClient; oops: XdsEchoClient };
  let during: { good: XdsEchoClient; oops: XdsEchoClient };

  before(async () => {
    for (const [id, host] of Object.entries(HOSTS)) backends.set(id, await startBackend({ id, host, locality }));
    canopy = await startCanopyProcess({
      server: { debounceMs: 20 },
      services: [spec('good', ['g1']), spec('oops', ['o1'])],
    });
    relay = await startAdsRelay(canopy.xdsUri);
    const [host, port] = relay.address.split(':');
    proxy = await startTcpProxy({ host: host!, port: Number(port) });
  });
  after(async () => {
    for (const c of clients) c.close();
    await proxy?.close();
    await relay?.close();
    await canopy?.stop();
    await Promise.all([...backends.values()].map((b) => b.stop()));
  });

  it('connected before: oops keeps its acknowledged backend, good gets its change', async () => {
    before1 = { good: client('grpc-before', 'good'), oops: client('grpc-before', 'oops') };
    await before1.good.waitUntil(servedBy(['g1']));
    await before1.oops.waitUntil(servedBy(['o1']));
    relay.corrupt('oops', 'address');
    await put('oops', ['o2']);
    await put('good', ['g1', 'g2']);
    await before1.good.waitUntil(servedBy(['g1', 'g2']));
    const nacked = () => canopy.logs().some((l) => l.includes('xds NACK') && l.includes('"node":"grpc-before"'));
    for (let i = 0; !nacked() && i < 100; i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok(nacked(), 'grpc-before NACKed the bad oops');
    const t = await before1.oops.tally(10);
    assert.ok(servedBy(['o1'])(t), `oops still at o1: ${JSON.stringify([...t.byBackend])} ${t.lastError}`);
  });

  it('connecting during: good is served in full, oops not at all; the NACK names oops', async () => {
    during = { good: client('grpc-during', 'good'), oops: client('grpc-during', 'oops') };
    await during.good.waitUntil(servedBy(['g1', 'g2']));
    const t = await during.oops.tally(4, { deadlineMs: 1000 });
    assert.equal(t.byBackend.size, 0, `no oops backend: ${JSON.stringify([...t.byBackend])}`);
    const lines = canopy
      .logs()
      .filter((l) => l.includes('xds NACK'))
      .map((l) => JSON.parse(l) as { node: string; services: string[]; detail: string; msg: string });
    for (const node of ['grpc-before', 'grpc-during']) {
      const mine = lines.filter((l) => l.node === node);
      assert.ok(mine.length > 0, `${node} NACKed`);
      for (const l of mine) {
        assert.deepEqual(l.services, ['oops'], JSON.stringify(l));
        assert.match(l.detail, /not-an-ip/);
        assert.match(l.msg, new RegExp(`xds NACK: client "${node}" refused EDS of service "oops"`));
      }
    }
  });

  it('once oops is clean both converge on it; a later change to good reaches both', async () => {
    relay.corrupt(undefined);
    await put('oops', ['o1', 'o2']);
    await before1.oops.waitUntil(servedBy(['o1', 'o2']));
    await during.oops.waitUntil(servedBy(['o1', 'o2']));
    await put('good', ['g2']);
    await before1.good.waitUntil(servedBy(['g2']));
    await during.good.waitUntil(servedBy(['g2']));
  });
});
