/**
 * `npm run bench:ui`: what the web view's once-a-second poll costs the admin
 * server, through the real fastify app (inject), at 100k endpoints in 1,000
 * leaves with 1,000 connected clients:
 *   - the view after a change (tree rebuilt, serialised and hashed once);
 *   - an unchanged poll (304: only the clients are placed and hashed);
 *   - the baseline: the whole view with every endpoint listed, serialised and
 *     hashed on every poll.
 * Benchmarks measure; they never fail.
 */
import { createHash } from 'node:crypto';
import { Registry } from 'prom-client';
import { buildAdminApp } from '../server/src/admin/app.js';
import { placeClients, treeView } from '../server/src/admin/ui-view.js';
import { ClaCache } from '../server/src/domain/cla-cache.js';
import { LocalStore } from '../server/src/store/level/local-store.js';
import { MeshFeed } from '../server/src/store/mesh-feed.js';
import type { ClientStatus } from '../server/src/sessions/client-status.js';
import { ENDPOINT_TYPE } from '../server/src/resources/type-urls.js';
import { failoverService, makeClients, makeEndpoints, median, quiesce, round } from './data.js';

const ENDPOINTS = 100_000;
const CLIENTS = 1000;
const RUNS = 15;

async function main(): Promise<void> {
  const endpoints = makeEndpoints(ENDPOINTS);
  const store = await LocalStore.open();
  const feed = await MeshFeed.open(store);
  await feed.caughtUp(await store.put(failoverService('big', endpoints), { owner: 'api' }));
  // Streams as /debug/clients reports them: data, not a test double of any behaviour measured here.
  const clients: ClientStatus[] = makeClients(CLIENTS, 100).map((placement, i) => ({
    streamId: i,
    nodeId: `c${i}`,
    cluster: '',
    peer: 'ipv4:127.0.0.1:1',
    connectedAt: '',
    placement,
    types: [{ typeUrl: ENDPOINT_TYPE, subscribed: ['big'], versionSent: 'v1', nonceSent: '1', versionAcked: 'v1' }],
  }));
  const app = buildAdminApp({
    store,
    mesh: feed.mesh,
    caughtUp: (revision) => feed.caughtUp(revision),
    claCache: new ClaCache(() => new Uint8Array()),
    registry: new Registry(),
    clients: () => clients,
    ready: () => true,
  });
  const time = async (fn: () => Promise<unknown>): Promise<number> => {
    const start = process.hrtime.bigint();
    await fn();
    return Number(process.hrtime.bigint() - start) / 1e6;
  };

  const changed: number[] = [];
  const unchanged: number[] = [];
  const baseline: number[] = [];
  let bytes = 0;
  for (let i = 0; i < RUNS; i++) {
    const ep = endpoints[i];
    if (!ep) break;
    await feed.caughtUp((await store.patchEndpoints('big', [{ ...ep, health: 'unhealthy' }], []))!);
    await quiesce();
    let etag = '';
    changed.push(
      await time(async () => {
        const res = await app.inject('/ui/api/services/big');
        etag = String(res.headers.etag);
        bytes = res.body.length;
      }),
    );
    unchanged.push(
      await time(async () => {
        const res = await app.inject({ url: '/ui/api/services/big', headers: { 'if-none-match': etag } });
        if (res.statusCode !== 304) throw new Error(`an unchanged view answered ${res.statusCode}`);
      }),
    );
    const service = feed.mesh.get('big');
    if (!service) throw new Error('no service');
    await quiesce();
    baseline.push(
      await time(async () => {
        const body = JSON.stringify({ ...treeView(service, Infinity), clients: placeClients(service, clients) });
        createHash('sha1').update(body).digest('base64url');
      }),
    );
  }
  const row = (what: string, xs: number[]) =>
    `${what.padEnd(58)} ${String(round(median(xs), 2)).padStart(8)} ms  (min ${round(Math.min(...xs), 2)}, max ${round(Math.max(...xs), 2)})`;
  process.stdout.write(
    [
      `web view poll, ${ENDPOINTS} endpoints in 1000 leaves, ${CLIENTS} clients, median of ${RUNS} (wall time):`,
      row(`view after a change (${Math.round(bytes / 1024)} KiB)`, changed),
      row('unchanged view (304)', unchanged),
      row('baseline: every endpoint listed, serialised and hashed per poll', baseline),
      '',
    ].join('\n'),
  );
  await app.close();
}

await main();
