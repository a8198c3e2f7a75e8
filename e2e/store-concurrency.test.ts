/**
 * Concurrent admin writes never lose each other (issue 19, section 1): many
 * writers over real HTTP, on one `canopy serve` (embedded store) and on
 * three replicas over one real etcd. Each endpoint gets two PATCHes of
 * different fields at the same moment, or a PATCH racing its removal; every
 * acknowledged change must be in the final state and nothing removed may
 * come back (a PATCH that lost to the removal answers 404).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { etcdSkip, startEtcd, type EtcdProcess } from './support/etcd-process.js';

const ENDPOINTS = 48;
const ROUNDS = 3;
const address = (i: number) => `10.9.${Math.floor(i / 200)}.${(i % 200) + 1}`;
const key = (i: number) => `${address(i)}:8080`;

const config = (service: string) => ({
  server: { debounceMs: 20 },
  services: [
    {
      name: service,
      endpoints: Array.from({ length: ENDPOINTS }, (_, i) => ({
        address: address(i),
        port: 8080,
        locality: { region: 'r1', zone: `z${i % 3}` },
      })),
    },
  ],
});

type Ep = { address: string; port: number; weight: number; health: string };

/**
 * One round against `pick(n)`'s servers, all requests at once: the first half
 * of the endpoints get a health PATCH and a weight PATCH; the second half a
 * weight PATCH and a removal. Returns what the final state must satisfy.
 */
async function round(service: string, pick: (n: number) => CanopyProcess, r: number) {
  const half = ENDPOINTS / 2;
  const health = r % 2 === 0 ? 'unhealthy' : 'draining';
  const weight = (i: number) => 10 + r * 100 + i;
  const epPath = (i: number) => `/api/v1/services/${service}/endpoints/${encodeURIComponent(key(i))}`;
  const requests: Promise<{ kind: string; i: number; status: number }>[] = [];
  let n = 0;
  const send = (kind: string, i: number, go: (p: CanopyProcess) => Promise<{ status: number }>) =>
    requests.push(go(pick(n++)).then((res) => ({ kind, i, status: res.status })));
  for (let i = 0; i < half; i++) {
    send('health', i, (p) => p.admin('PATCH', epPath(i), { health }));
    send('weight', i, (p) => p.admin('PATCH', epPath(i), { weight: weight(i) }));
  }
  for (let i = half; i < ENDPOINTS; i++) {
    send('weight', i, (p) => p.admin('PATCH', epPath(i), { weight: weight(i) }));
    send('remove', i, (p) => p.admin('PATCH', `/api/v1/services/${service}/endpoints`, { remove: [key(i)] }));
  }
  const results = await Promise.all(requests);
  return { results, health, weight };
}

async function finalEndpoints(p: CanopyProcess, service: string): Promise<Map<string, Ep>> {
  const res = await p.admin('GET', `/api/v1/services/${service}`);
  assert.equal(res.status, 200);
  return new Map((res.body as { endpoints: Ep[] }).endpoints.map((e) => [`${e.address}:${e.port}`, e]));
}

/** Every acknowledged change is there; removed endpoints stay removed; a losing PATCH answered 404. */
function check(state: Map<string, Ep>, outcome: Awaited<ReturnType<typeof round>>, where: string): void {
  const lost: string[] = [];
  for (const { kind, i, status } of outcome.results) {
    const ep = state.get(key(i));
    if (i < ENDPOINTS / 2) {
      assert.equal(status, 200, `${where}: ${kind} PATCH of ${key(i)}`);
      if (kind === 'health' && ep?.health !== outcome.health) lost.push(`${key(i)} health ${ep?.health}`);
      if (kind === 'weight' && ep?.weight !== outcome.weight(i)) lost.push(`${key(i)} weight ${ep?.weight}`);
    } else if (kind === 'remove') {
      assert.equal(status, 200, `${where}: removal of ${key(i)}`);
      if (ep) lost.push(`${key(i)} came back after its removal`);
    } else {
      assert.ok(status === 200 || status === 404, `${where}: PATCH racing a removal answers 200 or 404, got ${status}`);
    }
  }
  assert.deepEqual(lost, [], `${where}: acknowledged changes lost`);
}

/** Puts the removed half back so the next round races again. */
async function restore(p: CanopyProcess, service: string): Promise<void> {
  const upsert = Array.from({ length: ENDPOINTS / 2 }, (_, j) => {
    const i = ENDPOINTS / 2 + j;
    return { address: address(i), port: 8080, locality: { region: 'r1', zone: `z${i % 3}` } };
  });
  const res = await p.admin('PATCH', `/api/v1/services/${service}/endpoints`, { upsert });
  assert.equal(res.status, 200);
}

describe('concurrent writes on one server (embedded store)', () => {
  let server: CanopyProcess;
  before(async () => {
    server = await startCanopyProcess(config('race'), ['--admin-write-limit', '100000']);
  });
  after(async () => {
    await server?.stop();
  });

  it('two PATCHes of one endpoint both land; a PATCH never revives a removed endpoint', async () => {
    for (let r = 0; r < ROUNDS; r++) {
      const outcome = await round('race', () => server, r);
      check(await finalEndpoints(server, 'race'), outcome, `round ${r}`);
      await restore(server, 'race');
    }
  });
});

describe('concurrent writes on three replicas over one etcd', { skip: etcdSkip() }, () => {
  let etcd: EtcdProcess;
  const replicas: CanopyProcess[] = [];
  before(async () => {
    etcd = await startEtcd();
    const store = `--store=etcd://${etcd.endpoint}/canopy-race/`;
    for (let i = 0; i < 3; i++) {
      replicas.push(await startCanopyProcess(config('race'), [store, '--admin-write-limit', '100000']));
    }
  });
  after(async () => {
    for (const r of replicas) await r.stop();
    await etcd?.destroy();
  });

  it('writes spread over the replicas never lose each other, and every replica ends on the same state', async () => {
    for (let r = 0; r < ROUNDS; r++) {
      const outcome = await round('race', (n) => replicas[n % 3]!, r);
      // The last write is acknowledged on one replica; the others follow etcd's watch.
      const states = await converged(replicas, 'race');
      states.forEach((s, k) => check(s, outcome, `round ${r}, replica ${k}`));
      await restore(replicas[r % 3]!, 'race');
    }
  });
});

async function converged(replicas: readonly CanopyProcess[], service: string): Promise<Map<string, Ep>[]> {
  const end = Date.now() + 10_000;
  for (;;) {
    const states = await Promise.all(replicas.map((p) => finalEndpoints(p, service)));
    const shapes = states.map((s) => JSON.stringify([...s].sort()));
    if (shapes.every((x) => x === shapes[0]) || Date.now() > end) return states;
    await new Promise((r) => setTimeout(r, 100));
  }
}
