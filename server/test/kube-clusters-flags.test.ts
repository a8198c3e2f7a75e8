/**
 * The cluster list of `canopy serve` (issue 42): `--kubeconfig NAME=PATH`
 * (repeatable) with `--kube-network NAME=NETWORK`, the plain `--kubeconfig
 * PATH` as before, and the clusters file's fields with their paths.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { kubeOptions, type KubeValues } from '../src/cli/serve-kube.js';
import { parseClusterList } from '../src/kube/kube-cluster-list.js';

const base: KubeValues = {
  kubeSubzoneLabel: 'topology.istio.io/subzone',
  kubeUnreachableMs: 10_000,
  kubeCrdCheckMs: 60_000,
};

describe('the clusters canopy serve watches', () => {
  it('a plain --kubeconfig PATH is the one cluster, as before', () => {
    const o = kubeOptions({ ...base, kubeconfig: ['kc.yaml'] });
    assert.equal(o?.kubeconfig, 'kc.yaml');
    assert.equal(o?.clusters, undefined);
  });

  it('NAME=PATH, repeated, with networks; in-cluster named by --kube-cluster-name', () => {
    const o = kubeOptions({
      ...base,
      kubeconfig: ['east=a/east.yaml', 'west=west.yaml'],
      kubeNetwork: ['east=n1', 'home=n0'],
      kubeInCluster: true,
      kubeClusterName: 'home',
    });
    assert.deepEqual(o?.clusters, [
      { name: 'home', network: 'n0' },
      { name: 'east', network: 'n1', kubeconfig: 'a/east.yaml' },
      { name: 'west', network: '', kubeconfig: 'west.yaml' },
    ]);
  });

  it('refuses unnamed clusters among several, twice a name, a network for no cluster, and mixing a file', () => {
    const refused = (v: Partial<KubeValues>, re: RegExp) => assert.throws(() => kubeOptions({ ...base, ...v }), re);
    refused({ kubeconfig: ['a.yaml', 'b.yaml'] }, /names its cluster: NAME=a\.yaml/);
    refused({ kubeconfig: ['a=a.yaml', 'a=b.yaml'] }, /"a" is given twice/);
    refused({ kubeconfig: ['a=a.yaml'], kubeNetwork: ['b=n1'] }, /names no cluster: "b"/);
    refused({ kubeconfig: ['A=a.yaml'] }, /lower-case/);
    refused({ kubeconfig: ['a=a.yaml'], kubeClusters: 'c.yaml' }, /drop --kubeconfig/);
  });

  it('the clusters file: kubeconfig paths relative to it, errors by field path', () => {
    const dir = path.resolve('/etc/canopy');
    const ok = parseClusterList(
      { clusters: [{ name: 'east', network: 'n1', kubeconfig: 'east.yaml' }, { name: 'local' }] },
      dir,
    );
    assert.deepEqual(ok.errors, []);
    assert.deepEqual(ok.clusters, [
      { name: 'east', network: 'n1', kubeconfig: path.join(dir, 'east.yaml') },
      { name: 'local', network: '' },
    ]);
    const bad = parseClusterList({ clusters: [{ name: 'east', zone: 'x' }, { name: 'east' }, { network: 1 }] }, dir);
    assert.deepEqual(
      bad.errors.map((e) => e.path),
      ['clusters[0].zone', 'clusters[1].name', 'clusters[2].name'],
    );
    assert.deepEqual(parseClusterList({}, dir).errors, [{ path: 'clusters', message: 'must be a list' }]);
  });
});
