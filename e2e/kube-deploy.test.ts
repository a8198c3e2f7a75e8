/**
 * deploy/kubernetes/ against a real kube-apiserver with RBAC on: every
 * manifest passes a server-side dry run, and `canopy serve --kubeconfig` as
 * the documented ServiceAccount (a token from the TokenRequest API) with the
 * documented ClusterRole syncs and serves; the same Role without one verb
 * leaves Canopy not ready with an error that names what is missing.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  CoreV1Api,
  DiscoveryV1Api,
  KubeConfig,
  KubernetesObjectApi,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { loadAll } from 'js-yaml';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { kubeSkip, startKubeApiserver, type KubeApiserver } from './support/kube-apiserver.js';

const DEPLOY = fileURLToPath(new URL('../../deploy/kubernetes/', import.meta.url));
const manifests = (file: string) => loadAll(readFileSync(`${DEPLOY}${file}`, 'utf8')) as KubernetesObject[];

describe('deploy/kubernetes against a real API server with RBAC', { skip: kubeSkip() }, () => {
  let api: KubeApiserver;
  let objects: KubernetesObjectApi;
  let core: CoreV1Api;
  const canopies: CanopyProcess[] = [];

  const canopyAs = async (): Promise<CanopyProcess> => {
    const token = await core.createNamespacedServiceAccountToken({
      name: 'canopy',
      namespace: 'canopy-system',
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    });
    const kubeconfig = api.kubeconfig('canopy', { token: token.status!.token });
    const c = await startCanopyProcess({ services: [] }, [
      '--kubeconfig',
      kubeconfig,
      '--kube-unreachable-ms',
      '1000',
      '--debounce-ms',
      '20',
    ]);
    canopies.push(c);
    return c;
  };
  const until = async <T>(what: string, f: () => Promise<T | undefined>, ms = 20_000): Promise<T> => {
    const deadline = Date.now() + ms;
    for (;;) {
      const v = await f();
      if (v !== undefined) return v;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 150));
    }
  };

  before(async () => {
    api = await startKubeApiserver({ rbac: true });
    const kc = new KubeConfig();
    kc.loadFromFile(api.kubeconfig());
    objects = KubernetesObjectApi.makeApiClient(kc);
    core = kc.makeApiClient(CoreV1Api);
    const discovery = kc.makeApiClient(DiscoveryV1Api);
    await core.createNode({
      body: {
        metadata: {
          name: 'n1',
          labels: { 'topology.kubernetes.io/zone': 'z1', 'topology.kubernetes.io/region': 'r1' },
        },
      },
    });
    await core.createNamespacedService({
      namespace: 'default',
      body: { metadata: { name: 'web' }, spec: { ports: [{ name: 'http', port: 80 }] } },
    });
    await discovery.createNamespacedEndpointSlice({
      namespace: 'default',
      body: {
        metadata: { name: 'web-1', labels: { 'kubernetes.io/service-name': 'web' } },
        addressType: 'IPv4',
        ports: [{ name: 'http', port: 8080 }],
        endpoints: [{ addresses: ['10.2.0.1'], nodeName: 'n1', conditions: { ready: true } }],
      },
    });
  });

  after(async () => {
    await Promise.all(canopies.map((c) => c.stop()));
    await api?.destroy();
  });

  it('every manifest passes a server-side dry run', async () => {
    const all = ['rbac.yaml', 'canopy.yaml', 'agent.yaml'].flatMap(manifests);
    assert.ok(all.length >= 7, `expected the whole deployment, got ${all.length} objects`);
    // Namespaced objects are admitted only into a namespace that exists, even in a dry run.
    const ns = all.find((o) => o.kind === 'Namespace')!;
    await objects.create(ns);
    for (const o of all.filter((x) => x !== ns)) {
      const r = await objects.create(o, undefined, 'All').catch((err: unknown) => {
        throw new Error(`${o.kind} ${o.metadata?.name}: ${String((err as { body?: unknown }).body ?? err)}`);
      });
      assert.equal(r.metadata?.name, o.metadata?.name);
    }
    assert.equal(
      (await core.listNamespacedServiceAccount({ namespace: 'canopy-system' })).items.length,
      0,
      'dry run wrote nothing',
    );
  });

  it('the documented ClusterRole is enough: canopy syncs and serves as the ServiceAccount', async () => {
    for (const o of manifests('rbac.yaml').filter((x) => x.kind !== 'Namespace')) await objects.create(o);
    const canopy = await canopyAs();
    await until('ready', async () => ((await canopy.admin('GET', '/readyz')).status === 200 ? true : undefined));
    const svc = await canopy.admin('GET', '/api/v1/services/web.default');
    assert.equal(svc.status, 200, JSON.stringify(svc.body));
    const body = svc.body as {
      port: number;
      endpoints: { address: string; port: number; locality: { zone: string } }[];
    };
    assert.equal(body.port, 80);
    assert.deepEqual(
      body.endpoints.map((e) => [e.address, e.port, e.locality.zone]),
      [['10.2.0.1', 8080, 'z1']],
    );
  });

  it('without the watch verb on endpointslices, canopy is not ready and says what is missing', async () => {
    const role = manifests('rbac.yaml').find((o) => o.kind === 'ClusterRole') as KubernetesObject & {
      rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[];
    };
    const cut = {
      ...role,
      rules: role.rules.map((r) => (r.resources.includes('endpointslices') ? { ...r, verbs: ['list'] } : r)),
    };
    await objects.replace(cut);
    const canopy = await canopyAs();
    const r = await until('a 503 naming the verb', async () => {
      const res = await canopy.admin('GET', '/readyz');
      const message = (res.body as { error?: { message?: string } }).error?.message ?? '';
      return res.status === 503 && /endpointslices/.test(message) ? message : undefined;
    });
    assert.match(r, /cannot watch endpointslices: 403 Forbidden/);
    assert.match(r, /deploy\/kubernetes\/rbac\.yaml/);
    assert.ok(
      canopy.logs().some((l) => l.includes('cannot watch endpointslices')),
      'and the log says so',
    );
  });
});
