/**
 * `canopy serve --kubeconfig` says "ready" (log and terminal) only once
 * /readyz answers 200: started while the API server is down, it says it
 * serves but is not ready, and says ready after its first sync, with the
 * Service it synced. And a watch that cannot resume (the API server
 * restarted on an etcd compacted past every watch's resourceVersion) re-lists,
 * and the log says so with the 410's reason.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { kubeSkip, startKubeApiserver, type KubeApiserver } from './support/kube-apiserver.js';

/** Polls `f` every 100 ms until it holds; fails after `ms` naming `what`. */
async function until(what: string, f: () => Promise<boolean> | boolean, ms = 45_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** etcd's JSON gateway (v3): keys and values in base64, revisions as strings. */
async function etcd(endpoint: string, p: string, body: object): Promise<{ header?: { revision?: string } }> {
  const res = await fetch(`http://${endpoint}/v3/${p}`, { method: 'POST', body: JSON.stringify(body) });
  const text = await res.text();
  assert.equal(res.status, 200, `etcd ${p}: ${res.status} ${text}`);
  return JSON.parse(text) as { header?: { revision?: string } };
}
const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('canopy serve with Kubernetes: ready means ready; re-lists are logged', { skip: kubeSkip() }, () => {
  let api: KubeApiserver;
  let canopy: CanopyProcess;
  const text = () => canopy.logs().join('\n');
  const readyz = async () => (await fetch(`${canopy.adminUrl}/readyz`)).status;

  before(async () => {
    api = await startKubeApiserver();
    const post = async (p: string, body: unknown) => {
      const r = await api.request('POST', p, body);
      assert.equal(r.status, 201, `POST ${p}: ${JSON.stringify(r.body)}`);
    };
    await post('/api/v1/namespaces/default/services', {
      metadata: { name: 'web' },
      spec: { ports: [{ name: 'http', port: 80 }] },
    });
    await post('/apis/discovery.k8s.io/v1/namespaces/default/endpointslices', {
      metadata: { name: 'web-1', labels: { 'kubernetes.io/service-name': 'web' } },
      addressType: 'IPv4',
      ports: [{ name: 'http', port: 8080 }],
      endpoints: [{ addresses: ['10.252.9.1'], conditions: { ready: true } }],
    });
  });

  after(async () => {
    await canopy?.stop();
    await api?.destroy();
  });

  it('says it serves but is not ready while the API server is down, and ready only with /readyz at 200', async () => {
    const kubeconfig = api.kubeconfig();
    await api.stop();
    canopy = await startCanopyProcess({ services: [] }, ['--kubeconfig', kubeconfig, '--kube-unreachable-ms', '1000']);
    assert.match(text(), /canopy: serving, not ready yet: kubernetes: /);
    // The source has tried and failed: it would have synced by now if it could.
    await until('a failed list in the log', () => /cannot list/.test(text()));
    assert.equal(await readyz(), 503);
    assert.doesNotMatch(text(), /"canopy ready"|canopy: ready/);

    await api.restart();
    // Every /readyz asked after the ready line was seen answers 200.
    const afterReady: number[] = [];
    await until('the ready line', async () => {
      const seen = /canopy: ready/.test(text());
      const status = await readyz();
      if (seen) afterReady.push(status);
      return seen && /"canopy ready"/.test(text());
    });
    assert.deepEqual([...new Set(afterReady)], [200]);
    const line = canopy.logs().find((l) => l.includes('"canopy ready"'))!;
    // web, synced before the line; the API server's own default/kubernetes only once its controller has
    // written that Service's EndpointSlice, which a restarted API server may do after Canopy's first list.
    assert.ok((JSON.parse(line) as { services: number }).services >= 1, `ready with the synced Services: ${line}`);
  });

  it('a watch whose resourceVersion was compacted away re-lists, and the log says why', async () => {
    assert.equal(await readyz(), 200);
    await api.stop();
    // Writes the API server does not see, then a compaction past them: no watch can resume where it was.
    for (let i = 0; i < 3; i++)
      await etcd(api.etcdEndpoint, 'kv/put', { key: b64(`/canopy-test/${i}`), value: b64('x') });
    const { header } = await etcd(api.etcdEndpoint, 'kv/range', { key: b64('/canopy-test/0') });
    await etcd(api.etcdEndpoint, 'kv/compaction', { revision: header!.revision, physical: true });
    await api.restart();
    await until('a re-list in the log', () => /kubernetes: re-listed \/api\/v1\/services: 410 Gone/.test(text()));
    const line = canopy.logs().find((l) => l.includes('re-listed /api/v1/services'))!;
    assert.match(line, /too old resource version|expired|compacted/i, line);
    process.stdout.write(`# ${line}\n`);
    await until('ready again', async () => (await readyz()) === 200);
  });
});
