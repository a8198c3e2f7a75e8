/**
 * The node agent's side of the kernel bench: its CPU per version as trees
 * change (only changed trees decoded), and the map writes each kind of
 * one-endpoint change costs. Run with `npm run bench:kernel -- --agent` or
 * `-- --writes`.
 */
import { Datapath } from '../server/src/agent/datapath.js';
import { TreeInbox } from '../server/src/agent/tree-inbox.js';
import { Mesh } from '../server/src/domain/mesh.js';
import type { ServiceSpec } from '../server/src/domain/service.js';
import { contentHash } from '../server/src/resources/resource.js';
import { decodeLocalityTree, encodeLocalityTree, tryDecodeLocalityTree } from '../server/src/resources/tree-codec.js';
import { TREE_TYPE } from '../server/src/resources/type-urls.js';
import { messageType } from '../server/src/wire/protos.js';
import { kernelEnv, testCgroup } from '../e2e/support/kernel.js';
import { failoverService, makeEndpoints, median } from './data.js';
import { bigService, NODE } from './kernel-fixtures.js';

export interface AgentWorkFigures {
  readonly skipped?: string;
  readonly bigEndpoints?: number;
  readonly pairs?: number;
  /** Agent CPU ms per version (response decode + tree decode + plan + map writes), median and spread. */
  readonly withBigMs?: number;
  readonly withBigSpread?: string;
  readonly withoutBigMs?: number;
  readonly withoutBigSpread?: string;
  /** The same version handled as before this change: every tree decoded and hashed. */
  readonly decodeAllMs?: number;
  readonly decodeAllSpread?: string;
  /** Median of per-pair ratios withBig / withoutBig. */
  readonly ratio?: number;
  readonly method?: string;
}

/**
 * Agent work per version, as the agent does it for each SotW response: decode
 * the DiscoveryResponse, take its tree resources (TreeInbox: only new or
 * changed bytes are decoded), plan and write the maps. The version flips one
 * endpoint's health in a 4-endpoint service; one datapath also holds a
 * 100k-endpoint service (sent unchanged every version), the other does not;
 * a third handles the big one's versions decoding every tree (the agent
 * before TreeInbox). Interleaved, CPU time of this process (process.cpuUsage).
 */
export async function runAgentWorkBench(quick: boolean): Promise<AgentWorkFigures> {
  const env = kernelEnv();
  if (env.reason) return { skipped: env.reason };
  const n = quick ? 20_000 : 100_000;
  const pairs = quick ? 7 : 11;
  const Response = messageType('envoy.service.discovery.v3.DiscoveryResponse');
  const treeBytes = (spec: ServiceSpec): Uint8Array => {
    const mesh = new Mesh();
    mesh.put(spec);
    const st = mesh.get(spec.name)!;
    return encodeLocalityTree(st.spec, st.tree.compile());
  };
  const big = treeBytes({ ...bigService(n), name: 'big' });
  const small = (flip: boolean): Uint8Array => {
    const eps = makeEndpoints(4, 4).map((e, i) => ({
      ...e,
      address: `127.0.8.${i + 1}`,
      health: flip && i === 0 ? ('unhealthy' as const) : ('healthy' as const),
    }));
    return treeBytes({ ...failoverService('small', eps), vip: '127.100.8.1', port: 8080 });
  };
  const smallA = small(false);
  const smallB = small(true);
  const response = (version: number, trees: Uint8Array[]): Buffer =>
    Buffer.from(
      Response.encode(
        Response.fromObject({
          version_info: String(version),
          type_url: TREE_TYPE,
          nonce: String(version),
          resources: trees.map((value) => ({ type_url: TREE_TYPE, value })),
        }),
      ).finish(),
    );
  const cgs = ['with', 'without', 'all'].map((name) => testCgroup(`agentwork-${name}`));
  const dps: Datapath[] = [];
  try {
    for (const cg of cgs) {
      const dp = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, graceMs: 10 });
      dp.setWorkloads(NODE, []);
      dps.push(dp);
    }
    const inboxes = [new TreeInbox(), new TreeInbox()];
    // One version as the agent handles it: the response decoded as AgentAdsClient does, then the trees.
    const handle = (i: number, bytes: Buffer): number => {
      const cpu = process.cpuUsage();
      const res = Response.toObject(Response.decode(bytes), { defaults: true }) as {
        resources: { type_url: string; value: Uint8Array }[];
      };
      const resources = res.resources.map((r) => ({ typeUrl: r.type_url, value: r.value }));
      let trees;
      if (i < 2) {
        trees = inboxes[i]!.receive(resources).trees;
      } else {
        trees = resources.map((r) => {
          const d = tryDecodeLocalityTree(r.value);
          if (!d.ok) throw new Error(d.error);
          return { tree: d.tree, hash: contentHash(r.value) };
        });
      }
      const applied = dps[i]!.apply(trees);
      if (applied.rejected.length > 0) throw new Error(applied.rejected.map((x) => x.detail).join('; '));
      const used = process.cpuUsage(cpu);
      return (used.user + used.system) / 1000;
    };
    const rows: number[][] = [[], [], []];
    for (let v = 0; v <= pairs; v++) {
      const s = v % 2 ? smallB : smallA;
      const ms = [handle(0, response(v, [big, s])), handle(1, response(v, [s])), handle(2, response(v, [big, s]))];
      if (v > 0) ms.forEach((x, i) => rows[i]!.push(x)); // version 0 loads the trees: not a one-endpoint change
      for (const dp of dps) await dp.settle();
    }
    const spread = (xs: number[]) => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`;
    return {
      bigEndpoints: n,
      pairs,
      withBigMs: median(rows[0]!),
      withBigSpread: spread(rows[0]!),
      withoutBigMs: median(rows[1]!),
      withoutBigSpread: spread(rows[1]!),
      decodeAllMs: median(rows[2]!),
      decodeAllSpread: spread(rows[2]!),
      ratio: median(rows[0]!.map((x, i) => x / rows[1]![i]!)),
      method:
        'CPU ms of the agent process per version (DiscoveryResponse decode, TreeInbox, plan, map writes into real maps), one endpoint of a 4-endpoint service flipped each version; with a 100k-endpoint service in every response vs without it vs with it and every tree decoded (before); interleaved, medians of the versions, spread min–max',
    };
  } finally {
    for (const dp of dps) dp.close({ detach: true, cgroup: cgs[dps.indexOf(dp)]!.dir });
    for (const cg of cgs) cg.cleanup();
  }
}

/** Map writes of one apply for each kind of one-endpoint change in an N-endpoint service. */
export interface ChangeWrites {
  readonly skipped?: string;
  readonly endpoints?: number;
  readonly rows?: Record<string, { mapWrites: number; path: 'edited' | 'full' }>;
  readonly goal?: string;
}

/**
 * For each kind of one-endpoint change the issue names, the map writes of the
 * apply that loads it into an N-endpoint service (3 levels, 1,000 leaves):
 * the base version is loaded, then the changed one. Deterministic counts (no
 * timing): each is one apply.
 */
export async function runChangeWritesBench(quick: boolean): Promise<ChangeWrites> {
  const env = kernelEnv();
  if (env.reason) return { skipped: env.reason };
  const n = quick ? 20_000 : 100_000;
  const enc = (spec: ServiceSpec) => {
    const mesh = new Mesh();
    mesh.put(spec);
    const st = mesh.get(spec.name)!;
    const bytes = encodeLocalityTree(st.spec, st.tree.compile());
    return { tree: decodeLocalityTree(bytes), hash: contentHash(bytes) };
  };
  const base = bigService(n);
  const eps = base.endpoints;
  const first = eps[0]!;
  const other = eps.find(
    (e) => e.locality.subzone !== first.locality.subzone || e.locality.zone !== first.locality.zone,
  )!;
  const with_ = (endpoints: typeof eps, extra: Partial<ServiceSpec> = {}): ServiceSpec => ({
    ...base,
    ...extra,
    endpoints,
  });
  const weighted = eps.map((e, i) => (i === 1 ? { ...e, weight: 2 } : e));
  const nf: ServiceSpec = {
    ...base,
    loadBalancing: {
      ...base.loadBalancing,
      routingPreference: ['network', 'region', 'zone', 'subzone'],
      crossNetworkFailover: true,
    },
    endpoints: eps.map((e, i) => ({ ...e, network: i % 2 ? 'n2' : 'n1' })),
  };
  const v6: ServiceSpec = {
    ...base,
    vip: 'fd00:c::901',
    endpoints: eps.map((e, i) => ({ ...e, address: `fd00:d::${(i >> 16).toString(16)}:${(i & 0xffff).toString(16)}` })),
  };
  // Each kind: the versions loaded in turn; the last apply's writes are the row.
  const kinds: [string, ...ServiceSpec[]][] = [
    ['health flip (an endpoint leaves its leaf)', base, with_(eps.slice(1))],
    ['re-add after a health flip (it comes back)', base, with_(eps.slice(1)), base],
    ['add an endpoint to a leaf with no free slot', base, with_([...eps, { ...first, address: '10.255.255.1' }])],
    ['move an endpoint between leaves', base, with_([{ ...first, locality: other.locality }, ...eps.slice(1)])],
    ['weight change', base, with_(weighted)],
    ['health flip while weighted', with_(weighted), with_(weighted.slice(0, 1).concat(weighted.slice(2)))],
    [
      'new locality',
      base,
      with_([...eps, { ...first, address: '10.255.255.2', locality: { region: 'r-new', zone: 'z', subzone: 's' } }]),
    ],
    ['network-first service: health flip', nf, { ...nf, endpoints: nf.endpoints.slice(1) }],
    ['IPv6 service: health flip', v6, { ...v6, endpoints: v6.endpoints.slice(1) }],
  ];
  const cg = testCgroup('changewrites');
  let dp: Datapath | undefined;
  const rows: Record<string, { mapWrites: number; path: 'edited' | 'full' }> = {};
  try {
    dp = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, graceMs: 5 });
    dp.setWorkloads(NODE, []);
    for (const [kind, ...versions] of kinds) {
      for (const [i, spec] of versions.entries()) {
        const t = enc(spec);
        const planned = dp.plan([t]);
        const r = dp.apply([t]);
        if (r.rejected.length > 0) throw new Error(`${kind}: ${r.rejected.map((x) => x.detail).join('; ')}`);
        await dp.settle();
        if (i === versions.length - 1)
          rows[kind] = { mapWrites: r.mapWrites, path: planned.patches.length > 0 ? 'edited' : 'full' };
      }
      dp.apply([]);
      await dp.settle();
    }
  } finally {
    dp?.close({ detach: true, cgroup: cg.dir });
    cg.cleanup();
  }
  return { endpoints: n, rows, goal: '<= 100 map writes for each' };
}
