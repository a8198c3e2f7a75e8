/**
 * Issue 40's reproduction, against a real kube-apiserver and real Envoys
 * (delta + LEDS, as `canopy bootstrap envoy` writes them): the API server
 * accepts an EndpointSlice port of 70000, 0 or -5, multicast and broadcast
 * addresses; Canopy leaves exactly those endpoints out (the admin API's
 * rules), so no Envoy rejects an update and every clean service is served in
 * full to an Envoy connected before the bad objects and to one connecting
 * while they exist. The warning names `EndpointSlice repro/oops-1` and the
 * port, once; `/api/v1/skipped`, `canopy get skipped` and /metrics show it;
 * deleting the slice takes the entry away and keeps everything served.
 *
 * The 10.252.x.y addresses are only handed to Envoy: nothing dials them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Canopy } from '../server/src/main.js';
import { runCanopyCli } from './support/canopy-cli.js';
import { EnvoyProcess, envoySkip, explainFailure } from './support/envoy-process.js';
import { kubeSkip, startKubeApiserver, type KubeApiserver } from './support/kube-apiserver.js';
import { capturedLogs, envoyHosts as hostsOf, kubeObjects, startKubeCanopy } from './support/kube-fixtures.js';

const NS = 'repro';

describe('invalid Kubernetes input never reaches an Envoy (issue 40)', { skip: kubeSkip() || envoySkip() }, () => {
  let api: KubeApiserver;
  let k8s: ReturnType<typeof kubeObjects>;
  let canopy: Canopy;
  const envoys: EnvoyProcess[] = [];
  const { logs, logger } = capturedLogs<{
    level: number;
    msg: string;
    object?: string;
    field?: string;
    value?: string;
  }>();

  const admin = async (p: string) => {
    const res = await fetch(`http://${canopy.adminAddress}${p}`);
    return res.headers.get('content-type')?.includes('json') ? ((await res.json()) as unknown) : await res.text();
  };
  const serves = (e: EnvoyProcess, cluster: string, want: string[]) =>
    e.until(
      async () => JSON.stringify(await hostsOf(e, cluster)) === JSON.stringify(want),
      20_000,
      `${cluster} with exactly ${want.join(', ')}`,
    );
  const everyCleanService = async (e: EnvoyProcess) => {
    await serves(e, `good.${NS}`, ['10.252.0.1:8080', '10.252.0.2:8080']);
    await serves(e, `mcast.${NS}`, ['10.252.2.1:8080']);
    await serves(e, `bcast.${NS}`, ['10.252.3.1:8080']);
    assert.deepEqual(Object.fromEntries(await e.rejected()), {}, 'no Envoy rejected an update');
  };
  const warnings = (object: string) => logs.filter((l) => l.level === 40 && l.object === object);
  const startEnvoy = async (id: string, zone: string) => {
    const e = await EnvoyProcess.start({
      xds: canopy.xdsAddress,
      nodeId: id,
      locality: { region: 'r1', zone },
      outboundAddress: `127.0.63.${envoys.length + 1}`,
    });
    envoys.push(e);
    return e;
  };

  before(async () => {
    api = await startKubeApiserver();
    k8s = kubeObjects(api, NS);
    await k8s.create('/api/v1/namespaces', { metadata: { name: NS } });
    for (const zone of ['r1-a', 'r1-b'])
      await k8s.create('/api/v1/nodes', {
        metadata: {
          name: `node-${zone}`,
          labels: { 'topology.kubernetes.io/region': 'r1', 'topology.kubernetes.io/zone': zone },
        },
      });
    await k8s.service('good');
    await k8s.slice('good-1', 'good', 8080, [
      { address: '10.252.0.1', node: 'node-r1-a' },
      { address: '10.252.0.2', node: 'node-r1-b' },
    ]);
    canopy = await startKubeCanopy(api, logger);
    await canopy.whenReady();
  });

  after(async () => {
    await Promise.all(envoys.map((e) => e.stop()));
    await canopy?.stop();
    await api?.destroy();
  });

  it('an Envoy connected before and one connecting during the bad state get every clean service, whole', () =>
    explainFailure(
      () => envoys,
      async () => {
        const before = await startEnvoy('envoy-before', 'r1-a');
        await serves(before, `good.${NS}`, ['10.252.0.1:8080', '10.252.0.2:8080']);
        // The reproduction: a port the API server accepts and Envoy refuses; then port 0, -5, multicast, broadcast.
        await k8s.service('oops');
        await k8s.slice('oops-1', 'oops', 70000, [{ address: '10.252.1.1' }]);
        await k8s.slice('oops-0', 'oops', 0, [{ address: '10.252.1.2' }]);
        await k8s.slice('oops-neg', 'oops', -5, [{ address: '10.252.1.3' }]);
        await k8s.service('mcast');
        await k8s.slice('mcast-1', 'mcast', 8080, [{ address: '10.252.2.1' }, { address: '239.1.2.3' }]);
        await k8s.slice('mcast-6', 'mcast', 8080, [{ address: 'ff0e::1' }], 'IPv6');
        await k8s.service('bcast');
        await k8s.slice('bcast-1', 'bcast', 8080, [{ address: '10.252.3.1' }, { address: '255.255.255.255' }]);
        await everyCleanService(before);
        const during = await startEnvoy('envoy-during', 'r1-b');
        await everyCleanService(during);
        await everyCleanService(before);
        for (const e of envoys) assert.deepEqual(await hostsOf(e, `oops.${NS}`), []);

        const oops = warnings(`EndpointSlice ${NS}/oops-1`);
        assert.equal(oops.length, 1, `one warning for oops-1: ${JSON.stringify(oops)}`);
        assert.equal(oops[0]!.field, 'ports[0].port');
        assert.equal(oops[0]!.value, '70000');
        assert.match(oops[0]!.msg, /EndpointSlice repro\/oops-1: ports\[0\]\.port: .*70000/);
        for (const [object, field] of [
          [`EndpointSlice ${NS}/oops-0`, 'ports[0].port'],
          [`EndpointSlice ${NS}/oops-neg`, 'ports[0].port'],
          [`EndpointSlice ${NS}/mcast-1`, 'endpoints[1].addresses[0]'],
          [`EndpointSlice ${NS}/mcast-6`, 'endpoints[0].addresses[0]'],
          [`EndpointSlice ${NS}/bcast-1`, 'endpoints[1].addresses[0]'],
        ] as const) {
          const w = warnings(object);
          assert.equal(w.length, 1, `one warning for ${object}`);
          assert.equal(w[0]!.field, field);
        }
      },
    ));

  it('the admin API, `canopy get skipped` and /metrics show what is left out and why', async () => {
    const { skipped } = (await admin('/api/v1/skipped')) as { skipped: { object: string; value?: string }[] };
    assert.deepEqual(skipped.map((s) => s.object).sort(), [
      `EndpointSlice ${NS}/bcast-1`,
      `EndpointSlice ${NS}/mcast-1`,
      `EndpointSlice ${NS}/mcast-6`,
      `EndpointSlice ${NS}/oops-0`,
      `EndpointSlice ${NS}/oops-1`,
      `EndpointSlice ${NS}/oops-neg`,
    ]);
    const cli = await runCanopyCli(['get', 'skipped', '--admin', `http://${canopy.adminAddress}`]);
    assert.equal(cli.code, 0, cli.stderr);
    assert.match(cli.stdout, /^SOURCE\s+OBJECT\s+FIELD\s+VALUE\s+LEFT OUT\s+WHY/m);
    assert.match(
      cli.stdout,
      /kube\s+EndpointSlice repro\/oops-1\s+ports\[0\]\.port\s+70000\s+1 endpoint\(s\) of oops\.repro/,
    );
    const metrics = String(await admin('/metrics'));
    assert.match(metrics, /^canopy_input_skipped_total\{source="kube",reason="endpoint.port"\} 3$/m);
    assert.match(metrics, /^canopy_input_skipped_total\{source="kube",reason="endpoint.address"\} 3$/m);
    assert.match(metrics, /^canopy_input_skipped\{source="kube",reason="endpoint.port"\} 3$/m);
  });

  it('deleting the bad slices takes their entries away and keeps every service right', () =>
    explainFailure(
      () => envoys,
      async () => {
        for (const name of ['oops-1', 'oops-0', 'oops-neg']) {
          const r = await api.request('DELETE', `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices/${name}`);
          assert.equal(r.status, 200);
        }
        await k8s.slice('oops-2', 'oops', 8080, [{ address: '10.252.1.9' }]);
        for (const e of envoys) {
          await everyCleanService(e);
          await serves(e, `oops.${NS}`, ['10.252.1.9:8080']);
        }
        const after = await startEnvoy('envoy-after', 'r1-a');
        await everyCleanService(after);
        await serves(after, `oops.${NS}`, ['10.252.1.9:8080']);
        for (const e of envoys) assert.deepEqual(Object.fromEntries(await e.rejected()), {});
        const { skipped } = (await admin('/api/v1/skipped')) as { skipped: { object: string }[] };
        assert.deepEqual(skipped.map((s) => s.object).sort(), [
          `EndpointSlice ${NS}/bcast-1`,
          `EndpointSlice ${NS}/mcast-1`,
          `EndpointSlice ${NS}/mcast-6`,
        ]);
        const metrics = String(await admin('/metrics'));
        assert.doesNotMatch(metrics, /^canopy_input_skipped\{source="kube",reason="endpoint.port"\}/m);
        assert.match(metrics, /^canopy_input_skipped\{source="kube",reason="endpoint.address"\} 3$/m);
      },
    ));
});
