/**
 * Two `canopy serve --kubeconfig` replicas on one etcd store, watching one
 * real kube-apiserver: both write what they derive, conditionally on the
 * revision they last saw (kube/kube-writer.ts), so each Kubernetes change is
 * written once between them and neither undoes the other; kill one (kill -9)
 * and the other keeps serving and follows the next changes. Only the admin
 * API is read (nothing dials the endpoints), so no network namespace.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, DiscoveryV1Api, KubeConfig, type V1EndpointSlice } from '@kubernetes/client-node';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { etcdSkip, startEtcd, type EtcdProcess } from './support/etcd-process.js';
import { kubeSkip, startKubeApiserver, type KubeApiserver } from './support/kube-apiserver.js';

const NS = 'default';
const ADDRESSES = ['10.244.50.1', '10.244.50.2', '10.244.50.3'];

describe('two Canopy replicas on one etcd, one API server', { skip: kubeSkip() || etcdSkip() }, () => {
  let api: KubeApiserver;
  let etcd: EtcdProcess;
  let discovery: DiscoveryV1Api;
  const replicas: CanopyProcess[] = [];

  const slice = (unready: readonly string[]): V1EndpointSlice => ({
    metadata: { name: 'web-1', namespace: NS, labels: { 'kubernetes.io/service-name': 'web' } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080 }],
    endpoints: ADDRESSES.map((a) => ({ addresses: [a], conditions: { ready: !unready.includes(a) }, nodeName: 'n1' })),
  });
  const putSlice = (unready: readonly string[]) =>
    discovery.replaceNamespacedEndpointSlice({ name: 'web-1', namespace: NS, body: slice(unready) });
  const until = async <T>(what: string, f: () => Promise<T | undefined>, ms = 20_000): Promise<T> => {
    const deadline = Date.now() + ms;
    for (;;) {
      const v = await f();
      if (v !== undefined) return v;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  /** `address health` of web.default's endpoints as a replica serves them. */
  const served = async (c: CanopyProcess): Promise<string> => {
    const r = await c.admin('GET', `/api/v1/services/web.${NS}`);
    const body = r.body as { endpoints?: { address: string; health: string }[] } | undefined;
    return (body?.endpoints ?? [])
      .map((e) => `${e.address} ${e.health}`)
      .sort()
      .join(', ');
  };
  const expect = (unready: readonly string[]) =>
    ADDRESSES.map((a) => `${a} ${unready.includes(a) ? 'unhealthy' : 'healthy'}`).join(', ');
  /** The Kubernetes source's store writes, by op, summed over the given replicas. */
  const writes = async (cs: readonly CanopyProcess[]): Promise<Record<string, number>> => {
    const out: Record<string, number> = {};
    for (const c of cs) {
      const text = (await c.admin('GET', '/metrics')).body as string;
      for (const m of text.matchAll(/^canopy_kube_writes_total\{op="(\w+)"\} (\d+)/gm))
        out[m[1]!] = (out[m[1]!] ?? 0) + Number(m[2]);
    }
    return out;
  };
  const converged = (cs: readonly CanopyProcess[], unready: readonly string[]) =>
    until(`every replica serving ${expect(unready)}`, async () => {
      for (const c of cs) if ((await served(c)) !== expect(unready)) return undefined;
      return true;
    });

  before(async () => {
    api = await startKubeApiserver();
    etcd = await startEtcd();
    const kc = new KubeConfig();
    kc.loadFromFile(api.kubeconfig());
    const core = kc.makeApiClient(CoreV1Api);
    discovery = kc.makeApiClient(DiscoveryV1Api);
    await core.createNode({ body: { metadata: { name: 'n1', labels: { 'topology.kubernetes.io/zone': 'z1' } } } });
    await core.createNamespacedService({
      namespace: NS,
      body: { metadata: { name: 'web' }, spec: { ports: [{ name: 'http', port: 80 }] } },
    });
    await discovery.createNamespacedEndpointSlice({ namespace: NS, body: slice([]) });
    const args = ['--store', `etcd://${etcd.endpoint}/canopy-kube/`, '--kubeconfig', api.kubeconfig()];
    args.push('--kube-unreachable-ms', '1000', '--debounce-ms', '20');
    // Started together, so their first syncs race for the same empty store.
    replicas.push(
      ...(await Promise.all([startCanopyProcess({ services: [] }, args), startCanopyProcess({ services: [] }, args)])),
    );
    for (const c of replicas)
      await until('ready', async () => ((await c.admin('GET', '/readyz')).status === 200 ? true : undefined));
  });

  after(async () => {
    await Promise.all(replicas.map((c) => c.stop()));
    await etcd?.destroy();
    await api?.destroy();
  });

  it('the first syncs race: each service is put once between both replicas', async () => {
    await converged(replicas, []);
    const services = ((await replicas[0]!.admin('GET', '/api/v1/services')).body as { services: unknown[] }).services;
    const w = await writes(replicas);
    // `web.default` and the API server's own `kubernetes.default`.
    assert.equal(services.length, 2);
    assert.equal(w['put'], 2, JSON.stringify(w));
  });

  it('a readiness flip is written once, and neither replica writes it back', async () => {
    const before = await writes(replicas);
    await putSlice(['10.244.50.2']);
    await converged(replicas, ['10.244.50.2']);
    await new Promise((r) => setTimeout(r, 500));
    const after = await writes(replicas);
    assert.equal((after['patch'] ?? 0) - (before['patch'] ?? 0), 1, JSON.stringify({ before, after }));
    assert.equal(after['put'], before['put']);
    assert.equal(await served(replicas[1]!), expect(['10.244.50.2']), 'still, after the quiet period');
  });

  it('one replica killed: the other keeps serving and follows the next changes', async () => {
    await replicas[0]!.kill();
    const survivor = replicas[1]!;
    await putSlice(['10.244.50.1', '10.244.50.3']);
    await converged([survivor], ['10.244.50.1', '10.244.50.3']);
    await putSlice([]);
    await converged([survivor], []);
    assert.equal((await survivor.admin('GET', '/readyz')).status, 200);
  });
});
