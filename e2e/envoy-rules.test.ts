/**
 * Envoy rules the emulation encoded, run on real Envoy 1.40 bootstrapped by `canopy bootstrap envoy`:
 *
 * - Route timeout: Canopy's routes carry the service's `timeoutMs`, 0 (disabled) by default, since
 *   Envoy's own default of 15 s would cut long calls. /config_dump shows `0s`, and a backend that answers
 *   after a second gets its 200 through Envoy; with `timeoutMs: 300` Envoy answers 504
 *   `upstream request timeout` after about 300 ms. Envoy's default itself: a backend answering after
 *   16 s, reached through a static listener whose route sets no timeout, gets the 504 at 15 s, and
 *   through Canopy's listener (both sent at the start, while the other cases run) its 200.
 * - Services sharing a listener address: two HTTP services on one local port are one listener
 *   (`outbound|local:PORT`) with a virtual host each, which Envoy accepts and routes by authority; a TCP
 *   service on that port is refused by the admin API with its field. What Envoy does with a duplicate
 *   address, provoked on purpose: a static listener in one Envoy's bootstrap holds an address, a service
 *   on it makes the LDS update NACKed (`duplicate address`), the other listeners keep routing, and
 *   deleting the service clears it; and two listeners on one address in one update (an ADS relay adds a
 *   renamed copy of one): NACKed, yet the update's other new listener goes active (not dropped whole).
 * - LEDS with xdstp context parameters: a delta Envoy with `node_context_params` appends them to its
 *   LEDS globs; Canopy names the members with the same parameters, and Envoy holds and routes to them.
 *
 * Each Envoy ends with no `update_rejected` but the one NACK provoked on purpose.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startAdsRelay, type AdsRelay } from './support/ads-relay.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { EnvoyProcess, envoySkip, explainFailure } from './support/envoy-process.js';
import { failures, sendRequests, startHttpBackend, type HttpBackend } from './support/http-backends.js';

type Obj = Record<string, unknown>;
const skip = envoySkip();
const SLOW_PORT = 20101;
const SHARED_PORT = 20102;
/** The port a static listener in the `rules-sotw` Envoy's bootstrap holds. */
const HELD_PORT = 20103;
const SLOW_MS = 1000;
/** A static listener on the SotW Envoy whose route to Canopy's `glacial` cluster sets no timeout. */
const DEFAULT_PORT = 20104;
const GLACIAL_PORT = 20105;
/** Longer than Envoy's default route timeout (15 s). */
const GLACIAL_MS = 16_000;
const EXTRA_PORT = 20106;
const LEDS_ADDR = '127.0.73.1';
const SOTW_ADDR = '127.0.73.2';
const locality = { region: 'r1', zone: 'z1', subzone: 's1' };

/** A backend that answers its id after `ms`. */
async function slowBackend(host: string, ms: number): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    req.resume();
    const t = setTimeout(() => res.end(host), ms);
    res.once('close', () => clearTimeout(t));
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))),
  };
}

/** One request with a Host header: its status, body and how long it took. */
function timed(target: string, host: string): Promise<{ status: number; body: string; ms: number }> {
  const [hostname, port] = target.split(':');
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const req = http.request({ hostname, port: Number(port), path: '/', headers: { host }, timeout: 20_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, ms: Date.now() - t0 }));
    });
    req.on('timeout', () => req.destroy(new Error('client timeout')));
    req.on('error', reject);
    req.end();
  });
}

/** The route timeout of a RouteConfiguration Envoy holds, as its /config_dump prints it. */
function routeTimeout(dump: Obj, routeConfig: string): string | undefined {
  for (const c of dump['configs'] as Obj[])
    for (const r of (c['dynamic_route_configs'] as Obj[] | undefined) ?? []) {
      const rc = r['route_config'] as Obj;
      if (rc['name'] !== routeConfig) continue;
      const vh = (rc['virtual_hosts'] as Obj[])[0]!;
      return String(((vh['routes'] as Obj[])[0]!['route'] as Obj)['timeout']);
    }
  return undefined;
}

function listenerNames(dump: Obj): string[] {
  return (dump['configs'] as Obj[])
    .flatMap((c) => (c['dynamic_listeners'] as Obj[] | undefined) ?? [])
    .filter((l) => l['active_state'])
    .map((l) => String(l['name']))
    .sort();
}

/** The error Envoy holds for a listener it refused (`error_state.details`), if any. */
function listenerError(dump: Obj, name: string): string | undefined {
  for (const c of dump['configs'] as Obj[])
    for (const l of (c['dynamic_listeners'] as Obj[] | undefined) ?? [])
      if (l['name'] === name && l['error_state']) return String((l['error_state'] as Obj)['details']);
  return undefined;
}

describe(
  'real Envoy: route timeout, shared and duplicate listener addresses, LEDS context parameters',
  { skip },
  () => {
    let canopy: CanopyProcess;
    /** Between the SotW Envoy and Canopy: adds a duplicate listener to an LDS update on demand. */
    let relay: AdsRelay;
    let slow: Awaited<ReturnType<typeof slowBackend>>;
    let glacial: Awaited<ReturnType<typeof slowBackend>>;
    /** The two requests to the 16 s backend, sent once the Envoys are up: Envoy's default route, Canopy's. */
    let defaultRoute: Promise<{ status: number; body: string; ms: number }>;
    let canopyRoute: Promise<{ status: number; body: string; ms: number }>;
    const backends: HttpBackend[] = [];
    const envoys: EnvoyProcess[] = [];
    const [leds, sotw] = [() => envoys[0]!, () => envoys[1]!];

    const ep = (b: { port: number }, host: string, zone = 'z1') => ({
      address: host,
      port: b.port,
      locality: { region: 'r1', zone, subzone: 's1' },
    });

    before(async () => {
      slow = await slowBackend('127.0.72.9', SLOW_MS);
      glacial = await slowBackend('127.0.72.8', GLACIAL_MS);
      for (const h of ['127.0.72.1', '127.0.72.2', '127.0.72.3']) backends.push(await startHttpBackend(h));
      canopy = await startCanopyProcess({
        server: { debounceMs: 20 },
        services: [
          { name: 'slow', port: 8080, outboundPort: SLOW_PORT, protocol: 'http', endpoints: [ep(slow, '127.0.72.9')] },
          {
            name: 'web',
            port: 8080,
            outboundPort: SHARED_PORT,
            protocol: 'http',
            endpoints: [ep(backends[0]!, '127.0.72.1'), ep(backends[1]!, '127.0.72.2', 'z2')],
          },
          {
            name: 'api',
            port: 8081,
            outboundPort: SHARED_PORT,
            protocol: 'http',
            endpoints: [ep(backends[2]!, '127.0.72.3')],
          },
          {
            name: 'glacial',
            port: 8080,
            outboundPort: GLACIAL_PORT,
            protocol: 'http',
            endpoints: [ep(glacial, '127.0.72.8')],
          },
        ],
      });
      const xds = canopy.xdsUri.replace(/^.*:\/\//, '');
      relay = await startAdsRelay(xds);
      // One push each: should the second fail to start, after() still stops the first.
      envoys.push(
        await EnvoyProcess.start({
          xds,
          nodeId: 'rules-leds',
          locality,
          outboundAddress: LEDS_ADDR,
          overlay: { node: { cluster: 'mesh' }, node_context_params: ['cluster', 'id'] },
        }),
      );
      envoys.push(
        await EnvoyProcess.start({
          xds: relay.address,
          nodeId: 'rules-sotw',
          locality,
          outboundAddress: SOTW_ADDR,
          ads: 'sotw',
          overlay: { static_resources: { listeners: [heldListener(), defaultTimeoutListener()] } },
        }),
      );
      const e = sotw();
      await e.until(async () => routeTimeout(await e.configDump(), 'glacial') === '0s', 30_000, 'glacial route');
      defaultRoute = timed(`${SOTW_ADDR}:${DEFAULT_PORT}`, 'glacial');
      canopyRoute = timed(`${SOTW_ADDR}:${GLACIAL_PORT}`, 'glacial');
      // Awaited by their case; until then a rejection is not unhandled.
      for (const p of [defaultRoute, canopyRoute]) p.catch(() => {});
    });
    after(async () => {
      await Promise.all(envoys.map((e) => e.stop()));
      await relay?.close();
      await canopy?.stop();
      await Promise.all(backends.map((b) => b.close()));
      await slow?.close();
      await glacial?.close();
    });

    it('route timeout: 0 (disabled) by default lets a slow answer through; 300 ms gives a 504', () =>
      explainFailure(
        () => envoys,
        async () => {
          for (const e of envoys) {
            await e.until(async () => routeTimeout(await e.configDump(), 'slow') === '0s', 30_000, 'route timeout 0s');
            const r = await timed(`${e === leds() ? LEDS_ADDR : SOTW_ADDR}:${SLOW_PORT}`, 'slow');
            assert.deepEqual([r.status, r.body], [200, '127.0.72.9'], `${e.nodeId}: ${r.body}`);
            assert.ok(r.ms >= SLOW_MS);
          }
          const put = await canopy.admin('PUT', '/api/v1/services/slow', {
            port: 8080,
            outboundPort: SLOW_PORT,
            protocol: 'http',
            timeoutMs: 300,
            endpoints: [ep(slow, '127.0.72.9')],
          });
          assert.equal(put.status, 200, JSON.stringify(put.body));
          const seen: string[] = [];
          for (const e of envoys) {
            await e.until(async () => routeTimeout(await e.configDump(), 'slow') === '0.300s', 30_000, 'route 0.3s');
            const r = await timed(`${e === leds() ? LEDS_ADDR : SOTW_ADDR}:${SLOW_PORT}`, 'slow');
            seen.push(`${e.nodeId}: ${r.status} '${r.body}' after ${r.ms} ms`);
            assert.deepEqual([r.status, r.body], [504, 'upstream request timeout'], seen.join('\n'));
            assert.ok(r.ms >= 250 && r.ms < SLOW_MS, seen.join('\n'));
          }
          console.log(`# timeoutMs 300, backend answering after ${SLOW_MS} ms:\n#   ${seen.join('\n#   ')}`);
        },
      ));

    it('two HTTP services on one local port: one listener, a virtual host each, routed by authority', () =>
      explainFailure(
        () => envoys,
        async () => {
          for (const e of envoys) {
            const names = listenerNames(await e.configDump());
            assert.ok(names.includes(`outbound|local:${SHARED_PORT}`), names.join(', '));
            assert.ok(!names.includes('web') && !names.includes('api'), names.join(', '));
            const target = `${e === leds() ? LEDS_ADDR : SOTW_ADDR}:${SHARED_PORT}`;
            const web = await sendRequests(target, 20, { host: 'web' });
            const api = await sendRequests(target, 20, { host: `api:${SHARED_PORT}` });
            assert.deepEqual([...web.by], [['127.0.72.1', 20]], JSON.stringify([...web.failed]));
            assert.deepEqual([...api.by], [['127.0.72.3', 20]], JSON.stringify([...api.failed]));
          }
          // A TCP service cannot share a local port (nothing tells it apart): refused with its field.
          const tcp = await canopy.admin('PUT', '/api/v1/services/db', {
            port: 5432,
            outboundPort: SHARED_PORT,
            protocol: 'tcp',
            endpoints: [ep(backends[2]!, '127.0.72.3')],
          });
          assert.equal(tcp.status, 400, JSON.stringify(tcp.body));
          assert.match(JSON.stringify(tcp.body), /outboundPort/);
        },
      ));

    it('a duplicate address (a static listener holds it) is NACKed by Envoy; the rest keeps routing', () =>
      explainFailure(
        () => envoys,
        async () => {
          const put = await canopy.admin('PUT', '/api/v1/services/held', {
            port: 8080,
            outboundPort: HELD_PORT,
            protocol: 'http',
            endpoints: [ep(backends[0]!, '127.0.72.1')],
          });
          assert.equal(put.status, 201, JSON.stringify(put.body));
          await sotw().until(
            async () => listenerError(await sotw().configDump(), 'held') !== undefined,
            30_000,
            'NACK',
          );
          const detail = listenerError(await sotw().configDump(), 'held')!;
          console.log(`# rules-sotw refused listener "held": ${detail}`);
          assert.match(detail, /duplicate address/);
          assert.equal(await sotw().stat('listener_manager.lds.update_rejected'), 1);
          // The other Envoy has no static listener there and takes it.
          await leds().until(async () => listenerNames(await leds().configDump()).includes('held'), 30_000, 'held');
          const t = await sendRequests(`${SOTW_ADDR}:${SHARED_PORT}`, 20, { host: 'web' });
          assert.equal(t.by.get('127.0.72.1'), 20, JSON.stringify([...t.failed]));
          const before = await sotw().stat('listener_manager.lds.update_success');
          assert.equal((await canopy.admin('DELETE', '/api/v1/services/held')).status, 204);
          await sotw().until(
            async () => (await sotw().stat('listener_manager.lds.update_success'))! > before!,
            30_000,
            'LDS accepted again once the service is gone',
          );
        },
      ));

    it('two listeners on one address in one LDS update (a relay adds a copy) are NACKed', () =>
      explainFailure(
        () => envoys,
        async () => {
          const e = sotw();
          relay.duplicateListener({ name: 'slow', copy: 'slow-copy' });
          // A new service makes Canopy push LDS; the relay adds the copy of `slow` to it.
          const put = await canopy.admin('PUT', '/api/v1/services/extra', {
            port: 8080,
            outboundPort: EXTRA_PORT,
            protocol: 'http',
            endpoints: [ep(backends[0]!, '127.0.72.1')],
          });
          assert.equal(put.status, 201, JSON.stringify(put.body));
          await e.until(async () => listenerError(await e.configDump(), 'slow-copy') !== undefined, 30_000, 'NACK');
          const detail = listenerError(await e.configDump(), 'slow-copy')!;
          // NACKed, but not dropped whole: the new listener of the same update goes active once it has
          // warmed (its cluster's endpoints), which on a busy machine can come after the NACK.
          await e.until(async () => listenerNames(await e.configDump()).includes('extra'), 30_000, "'extra' active");
          const names = listenerNames(await e.configDump());
          console.log(`# rules-sotw, one update with 'slow' twice: ${detail}; active: ${names.join(', ')}`);
          assert.match(detail, /duplicate address/);
          assert.equal(await e.stat('listener_manager.lds.update_rejected'), 2);
          assert.ok(!names.includes('slow-copy'), names.join(', '));
          relay.duplicateListener(undefined);
          const before = await e.stat('listener_manager.lds.update_success');
          assert.equal((await canopy.admin('DELETE', '/api/v1/services/extra')).status, 204);
          await e.until(
            async () => (await e.stat('listener_manager.lds.update_success'))! > before!,
            30_000,
            'LDS ACK',
          );
        },
      ));

    it('LEDS with node_context_params: globs and members carry them; Envoy holds and routes to them', () =>
      explainFailure(
        () => envoys,
        async () => {
          const e = leds();
          const clients = (await canopy.admin('GET', '/debug/clients')).body as { clients: Obj[] };
          const mine = JSON.stringify(clients.clients.find((c) => JSON.stringify(c).includes('rules-leds')));
          const globs = mine.match(/xdstp:\/\/[^"]*\/\*\?[^"]*/g) ?? [];
          console.log(`# rules-leds subscribed: ${globs.join(' ')}`);
          assert.ok(globs.length > 0, mine.slice(0, 2000));
          for (const g of globs) assert.match(g, /\?xds\.node\.cluster=mesh&xds\.node\.id=rules-leds$/);
          assert.ok((await e.stat('cluster.web.leds.update_success'))! > 0);
          const hosts = (await e.clusters()).find((c) => c.name === 'web')?.hosts.map((h) => h.address) ?? [];
          assert.deepEqual(hosts.sort(), [`127.0.72.1:${backends[0]!.port}`, `127.0.72.2:${backends[1]!.port}`]);
          const t = await sendRequests(`${LEDS_ADDR}:${SHARED_PORT}`, 20, { host: 'web' });
          assert.equal(failures(t), 0, JSON.stringify([...t.failed]));
          assert.deepEqual([...t.by], [['127.0.72.1', 20]]);
        },
      ));

    it("Envoy's default route timeout is 15 s; Canopy's route (0s) lets a 16 s answer through", () =>
      explainFailure(
        () => envoys,
        async () => {
          const [d, c] = [await defaultRoute, await canopyRoute];
          console.log(
            `# backend answering after ${GLACIAL_MS} ms: route without timeout ${d.status} '${d.body}' after ${d.ms} ms; Canopy's route ${c.status} after ${c.ms} ms`,
          );
          assert.deepEqual([d.status, d.body], [504, 'upstream request timeout']);
          assert.ok(d.ms >= 14_900 && d.ms < GLACIAL_MS, `${d.ms} ms`);
          assert.deepEqual([c.status, c.body], [200, '127.0.72.8']);
          assert.ok(c.ms >= GLACIAL_MS);
        },
      ));

    it('no subscription rejected an update but the duplicate address provoked on purpose', () =>
      explainFailure(
        () => envoys,
        async () => {
          assert.deepEqual([...(await leds().rejected())], []);
          assert.deepEqual([...(await sotw().rejected())], [['listener_manager.lds.update_rejected', 2]]);
        },
      ));
  },
);

/** A static listener on the SotW Envoy's outbound address that answers 200 itself. */
function heldListener(): Obj {
  return staticListener('static-held', HELD_PORT, { direct_response: { status: 200 } });
}

/** A static listener whose route to Canopy's `glacial` cluster leaves `timeout` out: Envoy's default. */
function defaultTimeoutListener(): Obj {
  return staticListener('static-default-timeout', DEFAULT_PORT, { route: { cluster: 'glacial' } });
}

function staticListener(name: string, port: number, action: Obj): Obj {
  return {
    name,
    address: { socket_address: { address: SOTW_ADDR, port_value: port } },
    filter_chains: [
      {
        filters: [
          {
            name: 'envoy.filters.network.http_connection_manager',
            typed_config: {
              '@type':
                'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
              stat_prefix: name,
              // The cluster comes over CDS later: a static route may name it only unchecked.
              route_config: {
                validate_clusters: false,
                virtual_hosts: [{ name, domains: ['*'], routes: [{ match: { prefix: '/' }, ...action }] }],
              },
              http_filters: [
                {
                  name: 'envoy.filters.http.router',
                  typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' },
                },
              ],
            },
          },
        ],
      },
    ],
  };
}
