/**
 * deploy/kubernetes/ against a real kube-apiserver with RBAC on: every
 * manifest passes a server-side dry run, and `canopy serve --kubeconfig` as
 * the documented ServiceAccount (a token from the TokenRequest API) with the
 * documented ClusterRole syncs and serves; the same Role without one verb
 * leaves Canopy not ready with an error that names what is missing; the install steps of
 * docs/kubernetes.md, each kubectl line run as written, make the Secret the Deployment mounts.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
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
import { PatchStrategy } from '@kubernetes/client-node';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { kubeSkip, startKubeApiserver, type KubeApiserver } from './support/kube-apiserver.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DEPLOY = `${ROOT}deploy/kubernetes/`;
const manifests = (file: string) => loadAll(readFileSync(`${DEPLOY}${file}`, 'utf8')) as KubernetesObject[];

/** The install block of docs/kubernetes.md (the sh block after its kube-install marker), one command a line. */
function installBlock(): string[] {
  const page = readFileSync(`${ROOT}docs/kubernetes.md`, 'utf8');
  const block = /<!-- kube-install:[^\n]*-->\n```sh\n([\s\S]*?)```/.exec(page)?.[1];
  assert.ok(block, 'docs/kubernetes.md has the install block');
  return block
    .split('\n')
    .map((l) => l.replace(/\s+#.*$/, '').trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
}

interface PodSpec {
  containers: {
    image: string;
    imagePullPolicy?: string;
    args?: string[];
    volumeMounts?: { name: string; mountPath: string }[];
  }[];
  volumes?: { name: string; secret?: { secretName: string } }[];
}

describe('deploy/kubernetes against a real API server with RBAC', { skip: kubeSkip() }, () => {
  let api: KubeApiserver;
  let objects: KubernetesObjectApi;
  let core: CoreV1Api;
  const canopies: CanopyProcess[] = [];

  const canopyAs = async (extra: readonly string[] = []): Promise<CanopyProcess> => {
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
      ...extra,
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
  it('the install steps of docs/kubernetes.md, as written: the Secret the Deployment mounts serves as its token', async () => {
    const lines = installBlock();
    const built = lines.flatMap((l) => /^docker build -f \S+ -t (\S+) \.$/.exec(l)?.slice(1) ?? []);
    const loaded = lines.flatMap((l) => /^kind load docker-image (.+)$/.exec(l)?.[1]?.split(/\s+/) ?? []);
    const kubectl = lines.filter((l) => l.startsWith('kubectl'));
    assert.ok(kubectl.length >= 4, `the kubectl steps (${kubectl.length})`);
    for (const line of kubectl) {
      const file = /^kubectl apply -f (\S+)$/.exec(line)?.[1];
      const secret =
        /^kubectl -n (\S+) create secret generic (\S+) --from-literal=(\w+)="\$\(openssl rand -hex (\d+)\)"$/.exec(
          line,
        );
      if (file) {
        // kubectl apply: server-side apply, as `kubectl apply --server-side` does it.
        for (const o of loadAll(readFileSync(`${ROOT}${file}`, 'utf8')) as KubernetesObject[])
          await objects.patch(o, undefined, undefined, 'kubectl', true, PatchStrategy.ServerSideApply);
      } else if (secret) {
        const [, namespace, name, key, bytes] = secret;
        const value = execFileSync('openssl', ['rand', '-hex', bytes!], { encoding: 'utf8' }).trim();
        await core.createNamespacedSecret({
          namespace: namespace!,
          body: { metadata: { name: name! }, stringData: { [key!]: value } },
        });
      } else assert.fail(`a kubectl line this test cannot run, so the docs and the test would drift: ${line}`);
    }
    const pods: [string, PodSpec][] = [];
    for (const [kind, name] of [
      ['Deployment', 'canopy'],
      ['DaemonSet', 'canopy-agent'],
    ] as const) {
      const o = (await objects.read({
        apiVersion: 'apps/v1',
        kind,
        metadata: { name, namespace: 'canopy-system' },
      })) as KubernetesObject & { spec: { template: { spec: PodSpec } } };
      pods.push([name, o.spec.template.spec]);
    }
    for (const [name, pod] of pods)
      for (const c of pod.containers) {
        assert.ok(built.includes(c.image), `${name}: ${c.image} is built by the docs' docker build`);
        assert.ok(loaded.includes(c.image), `${name}: ${c.image} is loaded by the docs' kind load`);
        assert.ok(['IfNotPresent', 'Never'].includes(c.imagePullPolicy ?? ''), `${name}: a loaded image is not pulled`);
      }
    // The Deployment's --admin-token-file is a key of the Secret the steps made.
    const deployment = pods[0]![1];
    const main = deployment.containers[0]!;
    const tokenFile = main.args!.find((a) => a.startsWith('--admin-token-file='))!.split('=')[1]!;
    const mount = main.volumeMounts!.find((m) => tokenFile.startsWith(`${m.mountPath}/`))!;
    const volume = deployment.volumes!.find((v) => v.name === mount.name)!;
    const stored = await core.readNamespacedSecret({ name: volume.secret!.secretName, namespace: 'canopy-system' });
    const token = Buffer.from(stored.data![path.basename(tokenFile)]!, 'base64').toString();
    assert.match(token, /^[0-9a-f]{64}$/);
    // Canopy as the ServiceAccount with that token: ready (the applied ClusterRole), and the token is the key.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-kube-token-'));
    writeFileSync(path.join(dir, 'token'), token);
    const canopy = await canopyAs(['--admin-token-file', path.join(dir, 'token')]);
    await until('ready', async () => ((await canopy.admin('GET', '/readyz')).status === 200 ? true : undefined));
    const get = (auth?: string) =>
      fetch(`${canopy.adminUrl}/api/v1/services`, auth ? { headers: { authorization: `Bearer ${auth}` } } : {});
    assert.equal((await get()).status, 401);
    assert.equal((await get(token)).status, 200);
  });
});
