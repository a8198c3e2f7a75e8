/**
 * What the tests that feed a real kube-apiserver's objects to Canopy and read the result off real Envoys
 * share (e2e/kube-skipped, e2e/fuzz-sources): the objects they create in one namespace, Canopy in process
 * fed by that API server, its JSON log lines captured as objects, and the hosts an Envoy holds for a cluster.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { startCanopy, type Canopy, type CanopyOptions } from '../../server/src/main.js';
import type { EnvoyProcess } from './envoy-process.js';
import type { KubeApiserver } from './kube-apiserver.js';

/** An EndpointSlice endpoint: its address, and the Node it runs on (whose labels give its locality). */
export interface SliceEndpoint {
  readonly address: string;
  readonly node?: string;
}

/** Creates objects on `api` in the namespace `ns`; each create must be answered 2xx. */
export function kubeObjects(api: KubeApiserver, ns: string) {
  const create = async (p: string, body: unknown) => {
    const r = await api.request('POST', p, body);
    assert.ok(r.status >= 200 && r.status < 300, `POST ${p}: ${r.status} ${JSON.stringify(r.body)}`);
  };
  return {
    create,
    /** A Service with one port, http 80 → 8080. */
    service: (name: string, annotations?: Record<string, string>) =>
      create(`/api/v1/namespaces/${ns}/services`, {
        metadata: { name, ...(annotations ? { annotations } : {}) },
        spec: { ports: [{ name: 'http', port: 80, targetPort: 8080 }] },
      }),
    /** An EndpointSlice of `owner` with one TCP port named http; a string endpoint is an address alone. */
    slice: (
      name: string,
      owner: string,
      port: number,
      endpoints: readonly (string | SliceEndpoint)[],
      family = 'IPv4',
    ) =>
      create(`/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`, {
        metadata: { name, labels: { 'kubernetes.io/service-name': owner } },
        addressType: family,
        ports: [{ name: 'http', port, protocol: 'TCP' }],
        endpoints: endpoints.map((e) => {
          const { address, node } = typeof e === 'string' ? { address: e, node: undefined } : e;
          return { addresses: [address], conditions: { ready: true }, ...(node ? { nodeName: node } : {}) };
        }),
      }),
  };
}

/** A pino logger at info whose lines are parsed into `logs` as they are written. */
export function capturedLogs<T>(): { readonly logs: T[]; readonly logger: Logger } {
  const logs: T[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line) logs.push(JSON.parse(line) as T);
      done();
    },
  });
  return { logs, logger: pino({ level: 'info' }, sink) };
}

/** The Envoy's hosts of a cluster, as `address:port` sorted. */
export async function envoyHosts(e: EnvoyProcess, cluster: string): Promise<string[]> {
  return ((await e.clusters()).find((c) => c.name === cluster)?.hosts ?? []).map((h) => h.address).sort();
}

/**
 * Canopy in process on loopback ports of its own (20 ms debounce), fed by `api` with an unreachable API
 * server noticed within a second; `opts` adds to that or replaces it (a config, a store, a config file).
 * The caller waits for `whenReady()`, holding the Canopy to stop if it never comes.
 */
export function startKubeCanopy(
  api: KubeApiserver,
  logger: Logger,
  opts: Partial<CanopyOptions> = {},
): Promise<Canopy> {
  return startCanopy({
    config: { services: [], server: {} },
    host: '127.0.0.1',
    xdsPort: 0,
    adminPort: 0,
    debounceMs: 20,
    logger,
    kube: { kubeconfig: api.kubeconfig(), unreachableMs: 1000, maxBackoffMs: 500, crdCheckMs: 500 },
    ...opts,
  });
}
