/**
 * Run inside a network namespace e2e/envoy-transparent.test.ts made (with its iptables REDIRECT of
 * 10.96.0.0/16 to port 15001, uid 1337 exempt): Canopy, HTTP backends on 127.0.0.x, and an Envoy with
 * the stock listener shape (no canopy.outbound_address) running as uid 1337, all on the namespace's
 * loopback. Sends requests to the services' VIPs as a plain client would, and prints one JSON line of
 * what happened for the test to judge. Two TCP services share port 9000, told apart by their VIP (filter
 * chains matched on destination address); their backends answer their id on connect.
 * argv[2]: the Envoy's scratch directory owner uid.
 */
import { chmodSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import { startCanopyProcess } from './canopy-process.js';
import { EnvoyProcess } from './envoy-process.js';
import { sendRequests, startHttpBackend, type Tally } from './http-backends.js';

const UID = process.argv[2] ?? '1337';
const tally = (t: Tally) => ({ by: Object.fromEntries(t.by), failed: Object.fromEntries(t.failed) });

/** A TCP backend that writes its id and closes. */
async function tcpBackend(host: string): Promise<{ port: number; close(): Promise<void> }> {
  const server = net.createServer((s) => s.end(host));
  await new Promise<void>((r) => server.listen(0, host, r));
  return { port: (server.address() as AddressInfo).port, close: () => new Promise((r) => server.close(() => r())) };
}

/** `n` connections to `target` one after another: who answered each (or the error). */
async function connects(target: string, n: number): Promise<Record<string, number>> {
  const [host, port] = target.split(':');
  const by: Record<string, number> = {};
  for (let i = 0; i < n; i++) {
    const who = await new Promise<string>((resolve) => {
      const s = net.connect(Number(port), host);
      let got = '';
      s.setTimeout(3000, () => s.destroy(new Error('timeout')));
      s.on('data', (d) => (got += d.toString()));
      s.on('close', () => resolve(got || 'closed empty'));
      s.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    });
    by[who] = (by[who] ?? 0) + 1;
  }
  return by;
}

async function main(): Promise<void> {
  const places = [
    ['127.0.0.11', 'r1', 'z1'],
    ['127.0.0.12', 'r1', 'z2'],
    ['127.0.0.21', 'r1', 'z1'],
  ] as const;
  const backends = await Promise.all(places.map(([h]) => startHttpBackend(h)));
  const tcpPlaces = [
    ['127.0.0.31', 'r1', 'z1'],
    ['127.0.0.32', 'r1', 'z2'],
    ['127.0.0.41', 'r1', 'z1'],
  ] as const;
  const tcp = await Promise.all(tcpPlaces.map(([h]) => tcpBackend(h)));
  const tcpEp = (i: number) => ({
    address: tcpPlaces[i]![0],
    port: tcp[i]!.port,
    locality: { region: tcpPlaces[i]![1], zone: tcpPlaces[i]![2], subzone: 's1' },
  });
  const ep = (i: number) => ({
    address: places[i]![0],
    port: backends[i]!.port,
    locality: { region: places[i]![1], zone: places[i]![2], subzone: 's1' },
  });
  // Two HTTP services on one port: one shared listener, told apart by authority.
  const canopy = await startCanopyProcess({
    server: { debounceMs: 20 },
    services: [
      { name: 'web', vip: '10.96.0.10', port: 8080, protocol: 'http', endpoints: [ep(0), ep(1)] },
      { name: 'api', vip: '10.96.0.11', port: 8080, protocol: 'http', endpoints: [ep(2)] },
      // Two TCP services on one port: one listener, a filter chain per VIP. (A local-bind sidecar could not
      // tell them apart on one local port, so each names its own outboundPort; this Envoy does not use it.)
      {
        name: 'db',
        vip: '10.96.0.20',
        port: 9000,
        outboundPort: 19000,
        protocol: 'tcp',
        endpoints: [tcpEp(0), tcpEp(1)],
      },
      { name: 'cache', vip: '10.96.0.21', port: 9000, outboundPort: 19001, protocol: 'tcp', endpoints: [tcpEp(2)] },
    ],
  });
  const envoy = await EnvoyProcess.start({
    xds: canopy.xdsUri.replace(/^.*:\/\//, ''),
    nodeId: 'transparent',
    locality: { region: 'r1', zone: 'z1', subzone: 's1' },
    outboundAddress: '127.0.0.1',
    stockListeners: true,
    wrap: ['setpriv', '--reuid', UID, '--regid', UID, '--clear-groups'],
    beforeStart: (dir) => chmodSync(dir, 0o777),
  });
  try {
    const out: Record<string, unknown> = {};
    out['listeners'] = (await envoy.configDump())['configs'];
    out['web'] = tally(await sendRequests('10.96.0.10:8080', 50, { host: 'web' }));
    out['webByVip'] = tally(await sendRequests('10.96.0.10:8080', 20, { host: '10.96.0.10:8080' }));
    out['api'] = tally(await sendRequests('10.96.0.11:8080', 20, { host: 'api' }));
    const key = `127.0.0.11:${backends[0]!.port}`;
    await canopy.admin('PATCH', `/api/v1/services/web/endpoints/${key}`, { health: 'unhealthy' });
    const t0 = Date.now();
    await envoy.until(
      async () => (await sendRequests('10.96.0.10:8080', 10, { host: 'web' })).by.get('127.0.0.12') === 10,
      3000,
      'failover',
    );
    out['failoverMs'] = Date.now() - t0;
    out['db'] = await connects('10.96.0.20:9000', 20);
    out['cache'] = await connects('10.96.0.21:9000', 20);
    // A VIP on the port that no service has: no filter chain matches, Envoy closes the connection.
    out['stray'] = await connects('10.96.0.22:9000', 3);
    await canopy.admin('PATCH', `/api/v1/services/db/endpoints/127.0.0.31:${tcp[0]!.port}`, { health: 'unhealthy' });
    const t1 = Date.now();
    await envoy.until(async () => (await connects('10.96.0.20:9000', 5))['127.0.0.32'] === 5, 3000, 'tcp failover');
    out['tcpFailoverMs'] = Date.now() - t1;
    out['dbAfter'] = await connects('10.96.0.20:9000', 20);
    out['tcpChains'] = tcpChains(out['listeners'] as Obj[]);
    out['rejected'] = Object.fromEntries(await envoy.rejected());
    out['uid'] = (await import('node:fs'))
      .readFileSync(`/proc/${envoy.pid}/status`, 'utf8')
      .match(/^Uid:\s+(\d+)/m)?.[1];
    out['listenerNames'] = ((out['listeners'] as Record<string, unknown>[]) ?? [])
      .flatMap((c) => (c['dynamic_listeners'] as { name: string }[] | undefined) ?? [])
      .map((l) => l.name);
    delete out['listeners'];
    process.stdout.write(`${JSON.stringify(out)}\n`);
  } catch (err) {
    process.stdout.write(`${JSON.stringify({ error: (err as Error).message, diagnose: await envoy.diagnose() })}\n`);
  } finally {
    await envoy.stop();
    await canopy.stop();
    await Promise.all(backends.map((b) => b.close()));
    await Promise.all(tcp.map((b) => b.close()));
  }
}

type Obj = Record<string, unknown>;

/** The port 9000 listener's filter chains as Envoy holds them: `prefix/len → cluster` each. */
function tcpChains(configs: Obj[]): string[] {
  const listener = configs
    .flatMap((c) => (c['dynamic_listeners'] as Obj[] | undefined) ?? [])
    .find((l) => l['name'] === 'outbound|0.0.0.0:9000');
  const chains = ((listener?.['active_state'] as Obj | undefined)?.['listener'] as Obj | undefined)?.['filter_chains'];
  return ((chains as Obj[] | undefined) ?? []).map((fc) => {
    const ranges = ((fc['filter_chain_match'] as Obj | undefined)?.['prefix_ranges'] as Obj[] | undefined) ?? [];
    const proxy = ((fc['filters'] as Obj[])[0]!['typed_config'] as Obj)['cluster'];
    return `${ranges.map((r) => `${String(r['address_prefix'])}/${String(r['prefix_len'])}`).join(',')} → ${String(proxy)}`;
  });
}

await main();
