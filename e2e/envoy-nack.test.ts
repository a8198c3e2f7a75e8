/**
 * A rejected response never strands a client (issue 40 §2, §3), on real Envoy 1.40 over SotW, delta and
 * delta + LEDS. An ADS relay between the Envoys and Canopy makes every endpoint of service `oops` invalid
 * (port 70000, which Envoy's proto validation refuses): the NACK comes from outside Canopy, whatever
 * Canopy itself would refuse to send.
 * - Envoys connected before the bad state: a change to `oops` and one to the clean `good`, pushed
 *   together, are refused together; `good`'s still arrives (sent again apart), `oops` keeps its last
 *   acknowledged endpoint.
 * - Envoys connecting during it: `good` and `other` get every endpoint although the first response
 *   carried `oops` too; `oops` gets none.
 * - Canopy's log, /metrics and `canopy proxy-status` name the client, `oops` and Envoy's error.
 * - Once `oops` is clean again it converges on every Envoy, and a later change to `good` arrives whole.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startAdsRelay, type AdsRelay } from './support/ads-relay.js';
import { runCanopyCli } from './support/canopy-cli.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { EnvoyProcess, envoySkip, explainFailure, type EnvoyOptions } from './support/envoy-process.js';

const skip = envoySkip();
const near = { region: 'r1', zone: 'z1', subzone: 's1' };
const PORTS: Record<string, number> = { good: 20311, other: 20312, oops: 20313 };
/** Each case's protocol: SotW, delta with full CLAs, delta with LEDS collections. */
const FLAVOURS: readonly { name: string; o: Partial<EnvoyOptions> }[] = [
  { name: 'sotw', o: { ads: 'sotw' } },
  { name: 'delta', o: { ads: 'delta', metadata: { 'canopy.leds': 'false' } } },
  { name: 'leds', o: { ads: 'delta' } },
];

function entry(name: string, hosts: readonly string[]) {
  return {
    name,
    port: PORTS[name],
    protocol: 'http',
    loadBalancing: { mode: 'random', routingPreference: ['zone'] },
    endpoints: hosts.map((h, i) => ({
      address: h,
      port: 8080,
      locality: { region: 'r1', zone: `z${(i % 2) + 1}`, subzone: 's1' },
    })),
  };
}

async function hosts(envoy: EnvoyProcess, cluster: string): Promise<string> {
  const c = (await envoy.clusters()).find((x) => x.name === cluster);
  return (c?.hosts ?? [])
    .map((h) => h.address)
    .sort()
    .join(' ');
}

const addrs = (...hs: string[]) =>
  hs
    .map((h) => `${h}:8080`)
    .sort()
    .join(' ');

describe('real Envoy: a NACK never strands a client (SotW, delta, delta + LEDS)', { skip }, () => {
  let canopy: CanopyProcess;
  let relay: AdsRelay;
  const envoys: EnvoyProcess[] = [];
  const early = new Map<string, EnvoyProcess>();
  const late = new Map<string, EnvoyProcess>();
  let address = 1;

  const start = (flavour: (typeof FLAVOURS)[number], when: string, waitLive = true) =>
    EnvoyProcess.start({
      xds: relay.address,
      nodeId: `nack-${flavour.name}-${when}`,
      locality: near,
      outboundAddress: `127.0.72.${address++}`,
      waitLive,
      ...flavour.o,
    }).then((e) => {
      envoys.push(e);
      return e;
    });
  const put = async (name: string, hs: string[]) => {
    const r = await canopy.admin('PUT', `/api/v1/services/${name}`, entry(name, hs));
    assert.ok(r.status === 200 || r.status === 201, JSON.stringify(r.body));
  };
  const all = () => [...early.values(), ...late.values()];
  const see = (e: EnvoyProcess, cluster: string, want: string) =>
    e.until(async () => (await hosts(e, cluster)) === want, 20_000, `${cluster} at ${want}`);

  before(async () => {
    canopy = await startCanopyProcess({
      // Long enough that two PUTs in a row are pushed in one response.
      server: { debounceMs: 300 },
      services: [
        entry('good', ['127.0.90.1', '127.0.90.2']),
        entry('other', ['127.0.91.1']),
        entry('oops', ['127.0.92.1']),
      ],
    });
    relay = await startAdsRelay(canopy.xdsUri);
  });
  after(async () => {
    for (const e of envoys) await e.stop();
    await relay?.close();
    await canopy?.stop();
  });

  it('connected before: a refused response still brings the clean service its change', () =>
    explainFailure(
      () => envoys,
      async () => {
        for (const f of FLAVOURS) early.set(f.name, await start(f, 'before'));
        for (const e of early.values()) {
          await see(e, 'good', addrs('127.0.90.1', '127.0.90.2'));
          await see(e, 'oops', addrs('127.0.92.1'));
        }
        relay.corrupt('oops');
        await put('oops', ['127.0.92.2']);
        await put('good', ['127.0.90.1', '127.0.90.2', '127.0.90.3']);
        for (const e of early.values()) {
          await see(e, 'good', addrs('127.0.90.1', '127.0.90.2', '127.0.90.3'));
          await e.until(async () => (await e.rejected()).size > 0, 10_000, 'a rejected update');
          assert.equal(await hosts(e, 'oops'), addrs('127.0.92.1'), 'oops keeps what it acknowledged');
          assert.equal(await hosts(e, 'other'), addrs('127.0.91.1'));
        }
        assert.ok(relay.corrupted() > 0);
      },
    ));

  it('connecting during: the clean services get every endpoint, oops none', () =>
    explainFailure(
      () => envoys,
      async () => {
        // oops never gets its endpoints: its cluster waits out Envoy's initial fetch timeout (15 s) before LIVE.
        for (const f of FLAVOURS) late.set(f.name, await start(f, 'during', false));
        for (const e of late.values()) {
          await see(e, 'good', addrs('127.0.90.1', '127.0.90.2', '127.0.90.3'));
          await see(e, 'other', addrs('127.0.91.1'));
          await e.until(async () => (await e.rejected()).size > 0, 10_000, 'a rejected update');
          assert.equal(await hosts(e, 'oops'), '', 'oops has no endpoint it could accept');
        }
      },
    ));

  it('the log, /metrics and proxy-status name the client, the service and the error', async () => {
    const nacks = canopy
      .logs()
      .filter((l) => l.includes('xds NACK'))
      .map((l) => JSON.parse(l) as { msg: string; node: string; services: string[]; origin?: string; detail: string });
    for (const e of all()) {
      const mine = nacks.filter((n) => n.node === e.nodeId);
      assert.ok(
        mine.some((n) => n.services.length === 1 && n.services[0] === 'oops' && /65535|port/i.test(n.detail)),
        `${e.nodeId}: a NACK naming oops alone and the port: ${JSON.stringify(mine)}`,
      );
      assert.ok(
        mine.every((n) => !(n.services.length === 1 && n.services[0] !== 'oops')),
        'no clean service is refused on its own',
      );
    }
    const line = nacks.find((n) => n.services.length === 1)!;
    assert.match(
      line.msg,
      /xds NACK: client "nack-[a-z]+-[a-z]+" refused [A-Z]+ of service "oops" \(from the (config file|admin API)\)/,
    );
    assert.match(line.origin ?? '', /^the (config file|admin API)$/, 'the log names where oops came from');
    const metrics = (await canopy.admin('GET', '/metrics')).body as string;
    for (const type of ['EDS', 'LEDS'])
      assert.match(metrics, new RegExp(`canopy_xds_nacks_by_service_total\\{type="${type}",service="oops"\\} [1-9]`));
    assert.doesNotMatch(metrics, /canopy_xds_nacks_by_service_total\{[^}]*service="(good|other)"\}/);
    const ps = await runCanopyCli(['proxy-status', '--xds', canopy.xdsUri]);
    assert.equal(ps.code, 0, ps.stderr);
    for (const e of all())
      assert.match(ps.stdout, new RegExp(`\\n${e.nodeId}\\s+(EDS|LEDS)\\s+oops\\s+\\S+\\s+.*65535`));
    assert.doesNotMatch(ps.stdout, /\s(good|other)\s+\S+\s+.*65535/);
  });

  it('once oops is clean it converges everywhere; a later change to good arrives whole', () =>
    explainFailure(
      () => envoys,
      async () => {
        relay.corrupt(undefined);
        await put('oops', ['127.0.92.3']);
        for (const e of all()) await see(e, 'oops', addrs('127.0.92.3'));
        await put('good', ['127.0.90.1', '127.0.90.2', '127.0.90.3', '127.0.90.4']);
        for (const e of all()) {
          await see(e, 'good', addrs('127.0.90.1', '127.0.90.2', '127.0.90.3', '127.0.90.4'));
          assert.equal(await hosts(e, 'other'), addrs('127.0.91.1'));
        }
        const ps = await runCanopyCli(['proxy-status', '--xds', canopy.xdsUri]);
        assert.doesNotMatch(ps.stdout, /NACKED/, ps.stdout);
      },
    ));
});
