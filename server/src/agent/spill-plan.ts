/**
 * What a load-aware tree asks of canopy_spill, and how a counted node of
 * canopy_spill_cnt reads as a locality. Pure: spill-table.ts does the map I/O.
 *
 * Entries are keyed by the service's VIP and the client node's level and path
 * hash, and name their target leaves the same way, so they do not depend on
 * a tree version's slot layout: a connect resolves the chosen leaf in
 * whichever tree version it read.
 */
import type { TreeMessage } from '../resources/tree-codec.js';
import { readSvcValue } from './abi-svc.js';
import { SPILL_TARGETS, SVC_SPILL, spillKey, spillValue, type SpillNode } from './abi-spill.js';
import { nodePaths } from './tree-shape.js';

export interface SpillEntry {
  readonly key: Buffer;
  readonly value: Buffer;
}

/** The canopy_spill entries of one tree: one per client node with a spill. */
export function spillEntries(t: TreeMessage): SpillEntry[] {
  if (!t.loadAware || !t.spills?.length) return [];
  const paths = nodePaths(t);
  const nodeOf = (i: number): SpillNode => ({ level: paths.level[i]!, path: paths.hash[i]! });
  return t.spills.map((s) => {
    let targets = s.leaves.map((leaf, j) => ({ ...nodeOf(leaf), weight: s.weights[j]!, leaf }));
    // More leaves than the kernel's table holds: the heaviest, in tree order.
    if (targets.length > SPILL_TARGETS) {
      targets = [...targets]
        .sort((a, b) => b.weight - a.weight || a.leaf - b.leaf)
        .slice(0, SPILL_TARGETS)
        .sort((a, b) => a.leaf - b.leaf);
    }
    return { key: spillKey(t, nodeOf(s.node)), value: spillValue(targets) };
  });
}

/** A counted node: the locality it stands for (region, zone, subzone where the tree has them). */
export interface CountedLocality {
  readonly region: string;
  readonly zone: string;
  readonly subzone: string;
}

/** Each node of a tree by `${level}/${path}`, as the locality it stands for. */
export function localitiesOf(t: TreeMessage): Map<string, CountedLocality> {
  const paths = nodePaths(t);
  const out = new Map<string, CountedLocality>();
  const values: string[][] = [[]];
  out.set('0/0', { region: '', zone: '', subzone: '' });
  for (let i = 1; i < t.nodes.length; i++) {
    const node = t.nodes[i]!;
    const v = [...values[node.parent]!, node.value];
    values[i] = v;
    const at = (scope: string) => {
      const k = t.scopes.indexOf(scope);
      return k >= 0 && k < v.length ? v[k]! : '';
    };
    out.set(`${paths.level[i]}/${paths.hash[i]}`, { region: at('region'), zone: at('zone'), subzone: at('subzone') });
  }
  return out;
}

/** `${family}/${vip hex}/${port}` of a tree's service: what a spill key's service part reads as. */
export function serviceId(s: { readonly vip: number; readonly vip6?: Uint8Array; readonly port: number }): string {
  return s.vip6 ? `6/${Buffer.from(s.vip6).toString('hex')}/${s.port}` : `4/${(s.vip >>> 0).toString(16)}/${s.port}`;
}

/** The canopy_svc flag of a tree (SVC_SPILL when load aware), and whether the held entry has the same. */
export function spillFlag(t: TreeMessage, held: Buffer | undefined): { flag: number; same: boolean } {
  const flag = t.loadAware ? SVC_SPILL : 0;
  return { flag, same: held !== undefined && ((readSvcValue(held).flags ?? 0) & SVC_SPILL) === flag };
}
