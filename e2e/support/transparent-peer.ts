/**
 * Run inside a network namespace e2e/envoy-transparent.test.ts made (with its iptables REDIRECT of
 * 10.96.0.0/16 to port 15001, uid 1337 exempt): Canopy, HTTP backends on 127.0.0.x, and an Envoy with
 * the stock listener shape (no canopy.outbound_address) running as uid 1337, all on the namespace's
 * loopback. Sends requests to the services' VIPs as a plain client would, and prints one JSON line of
 * what happened for the test to judge. argv[2]: the Envoy's scratch directory owner uid.
 */
import { chmodSync } from 'node:fs';
import { startCanopyProcess } from './canopy-process.js';
import { EnvoyProcess } from './envoy-process.js';
import { sendRequests, startHttpBackend, type Tally } from './http-backends.js';

const UID = process.argv[2] ?? '1337';
const tally = (t: Tally) => ({ by: Object.fromEntries(t.by), failed: Object.fromEntries(t.failed) });

async function main(): Promise<void> {
  const places = [
    ['127.0.0.11', 'r1', 'z1'],
    ['127.0.0.12', 'r1', 'z2'],
    ['127.0.0.21', 'r1', 'z1'],
  ] as const;
  const backends = await Promise.all(places.map(([h]) => startHttpBackend(h)));
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
  }
}

await main();
