/**
 * Random invalid input through every source while real clients are
 * connected and new ones connect (issue 40 §4): fast-check draws invalid
 * objects and feeds each through its source — an edit of the config file,
 * an admin API write, a Service or EndpointSlice in a real kube-apiserver,
 * rows written straight into the etcd store (as another replica or an
 * older version might) — into one Canopy on that etcd. After each, the
 * property waits for Canopy to have seen it and asserts: no NACK at Canopy
 * (canopy_xds_nacks_total) nor at the Envoys (update_rejected), every clean
 * service served whole to every Envoy and to a grpc-js xDS client, and each
 * bad object and field named once in the log. A fresh Envoy connects after
 * every few objects. Runs are bounded (RUNS) to stay well under 60 s.
 *
 * The 10.252.x.y addresses are only handed to Envoy: nothing dials them.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { startBackend, type Backend } from '../server/src/demo/backend.js';
import { parseConfig } from '../server/src/domain/spec.js';
import type { Canopy } from '../server/src/main.js';
import { EnvoyProcess, envoySkip, explainFailure } from './support/envoy-process.js';
import { etcdSkip, startEtcd, type EtcdProcess } from './support/etcd-process.js';
import { kubeSkip, startKubeApiserver, type KubeApiserver } from './support/kube-apiserver.js';
import { capturedLogs, envoyHosts as hostsOf, kubeObjects, startKubeCanopy } from './support/kube-fixtures.js';

const NS = 'fuzz';
const RUNS = Number(process.env['CANOPY_FUZZ_RUNS'] ?? 32);
const PREFIX = '/fuzz/';
const PROBE = fileURLToPath(new URL('./support/xds-probe.js', import.meta.url));

interface ProbeSummary {
  readonly calls: number;
  readonly failures: number;
  readonly backends: Record<string, number>;
  readonly lastError: string;
}

/** A grpc-js xDS client calling `target` in its own process (support/xds-probe.ts), once it is served. */
async function startProbe(server: string, target: string, nodeId: string): Promise<{ stop(): Promise<ProbeSummary> }> {
  const child: ChildProcess = spawn(process.execPath, [PROBE, server, target, nodeId], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  const deadline = Date.now() + 20_000;
  while (!out.includes('served\n')) {
    if (Date.now() > deadline || child.exitCode !== null) {
      child.kill('SIGKILL');
      throw new Error(`the grpc-js client of ${target} was not served within 20 s: ${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    stop: async () => {
      const exited = new Promise((r) => child.once('exit', r));
      child.stdin!.end();
      await exited;
      return JSON.parse(out.trim().split('\n').pop()!) as ProbeSummary;
    },
  };
}

/** Ports the API server takes in a slice and Envoy refuses. */
const badPort = fc.oneof(
  fc.constant(0),
  fc.integer({ min: 65_536, max: 2_147_483_647 }),
  fc.integer({ min: -2_147_483_648, max: -1 }),
);
/** Addresses the API server takes and Canopy's rules refuse (it refuses loopback, link-local and 224.0.0.0/24). */
const badV4 = fc.oneof(
  fc.constant('255.255.255.255'),
  fc.tuple(fc.integer({ min: 225, max: 239 }), fc.nat(255), fc.nat(255), fc.nat(255)).map((o) => o.join('.')),
);
const badV6 = fc
  .tuple(fc.constantFrom('ff0e', 'ff05', 'ff08', 'ff1e'), fc.nat(0xffff))
  .map(([p, n]) => `${p}::${n.toString(16)}`);

type Sample =
  | { kind: 'slice-port'; port: number; good: number }
  | { kind: 'slice-address'; bad: string[]; good: number; family: 'IPv4' | 'IPv6' }
  | { kind: 'annotation'; mode: string }
  | { kind: 'api'; field: 'port' | 'address' | 'weight'; value: unknown }
  | { kind: 'etcd'; bad: { address: string; port: number; health?: string }[]; good: number }
  | { kind: 'file'; port: number };

const sample: fc.Arbitrary<Sample> = fc.oneof(
  fc.record({ kind: fc.constant('slice-port' as const), port: badPort, good: fc.integer({ min: 1, max: 3 }) }),
  fc.oneof(
    fc.record({
      kind: fc.constant('slice-address' as const),
      bad: fc.uniqueArray(badV4, { minLength: 1, maxLength: 3 }),
      good: fc.integer({ min: 0, max: 3 }),
      family: fc.constant('IPv4' as const),
    }),
    fc.record({
      kind: fc.constant('slice-address' as const),
      bad: fc.uniqueArray(badV6, { minLength: 1, maxLength: 2 }),
      good: fc.constant(0),
      family: fc.constant('IPv6' as const),
    }),
  ),
  fc.record({
    kind: fc.constant('annotation' as const),
    mode: fc.string({ minLength: 1, maxLength: 12 }).filter((m) => !['failover', 'strict', 'random'].includes(m)),
  }),
  fc.oneof(
    fc.record({ kind: fc.constant('api' as const), field: fc.constant('port' as const), value: badPort }),
    fc.record({ kind: fc.constant('api' as const), field: fc.constant('address' as const), value: badV4 }),
    fc.record({
      kind: fc.constant('api' as const),
      field: fc.constant('weight' as const),
      value: fc.integer({ max: 0 }),
    }),
  ),
  fc.record({
    kind: fc.constant('etcd' as const),
    bad: fc.uniqueArray(
      fc.oneof(
        badPort.map((port) => ({ address: '10.252.9.1', port })),
        badV4.map((address) => ({ address, port: 80 })),
        fc.constantFrom('nope', 'healthy?', '').map((health) => ({ address: '10.252.9.2', port: 80, health })),
      ),
      { minLength: 1, maxLength: 3, selector: (e) => `${e.address}:${e.port}` },
    ),
    good: fc.integer({ min: 0, max: 2 }),
  }),
  fc.record({ kind: fc.constant('file' as const), port: badPort }),
);

describe(
  'fuzz: invalid input through every source never reaches a client',
  { skip: kubeSkip() || envoySkip() || etcdSkip() },
  () => {
    let api: KubeApiserver;
    let k8s: ReturnType<typeof kubeObjects>;
    let etcd: EtcdProcess;
    let canopy: Canopy;
    let backend: Backend;
    let probe: { stop(): Promise<ProbeSummary> } | undefined;
    const envoys: EnvoyProcess[] = [];
    const { logs, logger } = capturedLogs<{ level: number; msg: string; object?: string; field?: string }>();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-fuzz-'));
    const configPath = path.join(dir, 'mesh.yaml');
    /** Clean services and the hosts (`address:port`, sorted) every Envoy must hold for each. */
    const clean = new Map<string, string[]>();
    /** (object, field) pairs that must each be named once in a warning. */
    const named: [string, string][] = [];
    let n = 0;

    const etcdTxn = async (puts: [string, unknown][]) => {
      const b64 = (s: string) => Buffer.from(s).toString('base64');
      const success = puts.map(([k, v]) => ({
        requestPut: { key: b64(`${PREFIX}${k}`), value: b64(JSON.stringify(v)) },
      }));
      const res = await fetch(`http://${etcd.endpoint}/v3/kv/txn`, {
        method: 'POST',
        body: JSON.stringify({ success }),
      });
      assert.equal(res.status, 200, await res.text());
    };
    const admin = async (method: string, p: string, body?: unknown) => {
      const res = await fetch(`http://${canopy.adminAddress}${p}`, {
        method,
        ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
      });
      const text = await res.text();
      return { status: res.status, text };
    };
    const cleanFile = () => ({
      services: [
        {
          name: 'fuzz-file',
          endpoints: [{ address: '127.0.0.1', port: backend.port, locality: { region: 'r1', zone: 'a' } }],
        },
      ],
    });
    const skippedObjects = async () =>
      new Set(
        (JSON.parse((await admin('GET', '/api/v1/skipped')).text) as { skipped: { object: string }[] }).skipped.map(
          (s) => s.object,
        ),
      );
    const until = async (what: string, f: () => Promise<boolean> | boolean, ms = 15_000) => {
      const deadline = Date.now() + ms;
      while (!(await f())) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    const envoyServesAll = async (e: EnvoyProcess) => {
      for (const [name, want] of clean)
        await e.until(
          async () => JSON.stringify(await hostsOf(e, name)) === JSON.stringify(want),
          15_000,
          `${name} = ${want.join(',')}`,
        );
    };
    const nacks = async () => {
      const text = (await admin('GET', '/metrics')).text;
      return [...text.matchAll(/^canopy_xds_nacks_total\{[^}]*\} (\d+)$/gm)].reduce((s, m) => s + Number(m[1]), 0);
    };
    const startEnvoy = async () => {
      const e = await EnvoyProcess.start({
        xds: canopy.xdsAddress,
        nodeId: `fuzz-envoy-${envoys.length}`,
        locality: { region: 'r1', zone: 'a' },
        outboundAddress: `127.0.64.${envoys.length + 1}`,
      });
      envoys.push(e);
      return e;
    };

    /** Feeds one sample through its source and waits until Canopy has seen it. */
    const feed = async (s: Sample) => {
      const i = n++;
      const mark = named.length;
      const good = (count: number, base: number) => Array.from({ length: count }, (_, k) => `10.252.${base}.${k + 1}`);
      if (s.kind === 'slice-port') {
        const name = `p${i}`;
        await k8s.service(name);
        await k8s.slice(`${name}-1`, name, s.port, good(s.good, i % 200));
        named.push([`EndpointSlice ${NS}/${name}-1`, 'ports[0].port']);
        clean.set(`${name}.${NS}`, []);
      } else if (s.kind === 'slice-address') {
        const name = `a${i}`;
        await k8s.service(name);
        const ok = good(s.good, i % 200);
        await k8s.slice(`${name}-1`, name, 8080, [...ok, ...s.bad], s.family);
        s.bad.forEach((_, k) =>
          named.push([`EndpointSlice ${NS}/${name}-1`, `endpoints[${ok.length + k}].addresses[0]`]),
        );
        clean.set(`${name}.${NS}`, ok.map((a) => `${a}:8080`).sort());
      } else if (s.kind === 'annotation') {
        const name = `m${i}`;
        await k8s.service(name, { 'canopy.dev/load-balancing': JSON.stringify({ mode: s.mode }) });
        named.push([`Service ${NS}/${name}`, 'metadata.annotations["canopy.dev/load-balancing"].mode']);
      } else if (s.kind === 'api') {
        const ep = { address: '10.252.250.1', port: 80, [s.field]: s.value };
        const r = await admin('PUT', `/api/v1/services/api${i}`, { name: `api${i}`, endpoints: [ep] });
        assert.equal(r.status, 400, r.text);
        assert.match(r.text, new RegExp(`endpoints\\[0\\]\\.${s.field}`));
        return;
      } else if (s.kind === 'etcd') {
        const name = `e${i}`;
        const ok = good(s.good, 200 + (i % 50)).map((address) => ({ address, port: 80 }));
        const full = (e: object) => ({
          locality: { region: 'r1', zone: 'a', subzone: '' },
          network: '',
          node: '',
          cluster: '',
          labels: {},
          health: 'healthy',
          weight: 1,
          ...e,
        });
        const head = {
          name,
          loadBalancing: {
            mode: 'failover',
            routingPreference: ['region', 'zone', 'subzone'],
            crossNetworkFailover: true,
            overprovisioningFactor: 140,
          },
        };
        await etcdTxn([
          [`s/${name}`, { head, owner: 'api', op: 'put' }],
          [`b/${name}/00`, [...ok, ...s.bad].map(full)],
        ]);
        for (const b of s.bad) {
          const key = `${b.address}:${b.port}`;
          named.push([`service ${name}, endpoint ${key}`, fieldOf(b)]);
        }
        clean.set(name, ok.map((e) => `${e.address}:80`).sort());
      } else {
        // The file: an edit that adds a bad service is refused whole; the running config stays.
        const before = logs.length;
        const bad = { name: `f${i}`, endpoints: [{ address: '127.0.0.1', port: s.port }] };
        writeFileSync(configPath, JSON.stringify({ services: [...cleanFile().services, bad] }));
        await until('the file edit refused', () => logs.slice(before).some((l) => /config edit rejected/.test(l.msg)));
        const refusal = logs.slice(before).find((l) => /config edit rejected/.test(l.msg))!;
        assert.match(refusal.msg, /services\[1\]\.endpoints\[0\]\.port/);
        writeFileSync(configPath, JSON.stringify(cleanFile()));
        return;
      }
      const objects = named.slice(mark).map(([o]) => o);
      await until(`${objects.join(', ')} listed as skipped`, async () => {
        const now = await skippedObjects();
        return objects.every((o) => now.has(o));
      });
    };

    before(async () => {
      etcd = await startEtcd();
      api = await startKubeApiserver();
      k8s = kubeObjects(api, NS);
      backend = await startBackend({
        id: 'fuzz-file-b',
        host: '127.0.0.1',
        locality: { region: 'r1', zone: 'a', subzone: '' },
      });
      await k8s.create('/api/v1/namespaces', { metadata: { name: NS } });
      await k8s.service('clean');
      await k8s.slice('clean-1', 'clean', 8080, ['10.252.0.1', '10.252.0.2']);
      writeFileSync(configPath, JSON.stringify(cleanFile()));
      const parsed = parseConfig(cleanFile());
      assert.ok(parsed.ok);
      canopy = await startKubeCanopy(api, logger, {
        config: parsed.value,
        configPath,
        storeUrl: `etcd://${etcd.endpoint}${PREFIX}`,
      });
      await canopy.whenReady();
      const put = await admin('PUT', '/api/v1/services/fuzz-api', {
        name: 'fuzz-api',
        endpoints: [{ address: '10.252.251.1', port: 80 }],
      });
      assert.equal(put.status, 201, put.text);
      clean.set(`clean.${NS}`, ['10.252.0.1:8080', '10.252.0.2:8080']);
      clean.set('fuzz-file', [`127.0.0.1:${backend.port}`]);
      clean.set('fuzz-api', ['10.252.251.1:80']);
      await startEnvoy();
      // Connected through the whole run, as a grpc-js xDS client (its own process: support/xds-probe.ts).
      probe = await startProbe(canopy.xdsAddress, 'fuzz-file', 'fuzz-grpc');
    });

    after(async () => {
      await probe?.stop();
      await Promise.all(envoys.map((e) => e.stop()));
      await canopy?.stop();
      await backend?.stop();
      await api?.destroy();
      await etcd?.destroy();
      rmSync(dir, { recursive: true, force: true });
    });

    it(`${RUNS} random invalid objects: 0 NACKs, every clean service whole, each bad one named once`, () =>
      explainFailure(
        () => envoys,
        async () => {
          const started = Date.now();
          await fc.assert(
            fc.asyncProperty(sample, async (s) => {
              await feed(s);
              if (n % 8 === 0) await startEnvoy();
              assert.equal(await nacks(), 0, `Canopy saw a NACK after ${JSON.stringify(s)}`);
            }),
            {
              numRuns: RUNS,
              endOnFailure: true,
              ...(process.env['CANOPY_FUZZ_SEED'] ? { seed: Number(process.env['CANOPY_FUZZ_SEED']) } : {}),
            },
          );
          await startEnvoy();
          for (const e of envoys) await envoyServesAll(e);
          // The grpc-js client connected all along, and a new one: served, no call failed.
          const fresh = await startProbe(canopy.xdsAddress, 'fuzz-file', 'fuzz-grpc-new');
          for (const summary of [await probe!.stop(), await fresh.stop()]) {
            assert.equal(summary.failures, 0, summary.lastError);
            assert.ok((summary.backends['fuzz-file-b'] ?? 0) > 0);
          }
          probe = undefined;
          assert.equal(await nacks(), 0);
          for (const e of envoys)
            assert.deepEqual(Object.fromEntries(await e.rejected()), {}, `${e.nodeId} rejected an update`);
          for (const [object, field] of named) {
            const w = logs.filter((l) => l.level === 40 && l.object === object && l.field === field);
            assert.equal(w.length, 1, `${object} ${field} named once in the log: ${JSON.stringify(w)}`);
          }
          process.stdout.write(
            `# fuzz: ${RUNS} samples, ${named.length} bad objects, ${envoys.length} Envoys, ${Date.now() - started} ms\n`,
          );
        },
      ));
  },
);

/** The field the feed names for a bad etcd endpoint (within the endpoint). */
function fieldOf(e: { address: string; port: number; health?: string }): string {
  if (e.health !== undefined) return 'health';
  if (!(e.port >= 1 && e.port <= 65535)) return 'port';
  return 'address';
}
