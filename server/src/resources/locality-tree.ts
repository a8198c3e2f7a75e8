/**
 * canopy.v1.LocalityTree: a service's compiled tree for node agents, encoded
 * once per service generation and sent to every agent as the same bytes
 * (a load plan's new epoch is a new generation; an unchanged plan, unchanged bytes). Only
 * services the kernel can intercept (an IP VIP and a port) have one.
 *
 * A dual-stack service (two VIPs, one per family) has a second resource,
 * `NAME#ipv4` or `NAME#ipv6` after its secondary VIP's family: the same
 * service and tree over that VIP and that family's backends. The agent keys
 * its maps by VIP and port, so it installs both.
 */
import type { Mesh, ServiceState } from '../domain/mesh.js';
import { makeResource, type Resource } from './resource.js';
import type { ResourceType } from './resource-type.js';
import { encodeLocalityTree, ipv4ToInt, kernelVips } from './tree-codec.js';
import { treeSpills } from './tree-spill.js';
import { TREE_TYPE } from './type-urls.js';

const FAMILY_SUFFIXES = ['#ipv4', '#ipv6'] as const;

/** The resource names of a service's trees: its name for the primary VIP, a suffixed one for the other. */
function treeNames(name: string, vips: readonly string[]): string[] {
  return vips.map((v, i) => (i === 0 ? name : `${name}${ipv4ToInt(v) !== undefined ? '#ipv4' : '#ipv6'}`));
}

export function localityTreeType(mesh: Mesh): ResourceType {
  const held = new WeakMap<ServiceState, Map<string, { generation: number; resource: Resource }>>();
  return {
    typeUrl: TREE_TYPE,
    shortName: 'TREE',
    // Full state, so an agent unloads a service that is no longer sent.
    fullStateInSotw: true,
    pushRank: 4,
    names: () => mesh.list().flatMap((s) => treeNames(s.name, kernelVips(s.spec))),
    resolve(name) {
      const hash = name.lastIndexOf('#');
      const service = mesh.get(hash < 0 ? name : name.slice(0, hash));
      if (!service) return undefined;
      const vips = kernelVips(service.spec);
      const at = treeNames(service.name, vips).indexOf(name);
      if (at < 0) return undefined;
      const byName = held.get(service) ?? held.set(service, new Map()).get(service)!;
      const hit = byName.get(name);
      if (hit?.generation === service.generation) return hit.resource;
      // A load-aware service's tree carries its load plan (setLoad bumps the generation).
      const spills = treeSpills(service.tree, service.load);
      const bytes = encodeLocalityTree(service.spec, service.tree.compile(), spills, vips[at]);
      const resource = makeResource(name, TREE_TYPE, bytes);
      byName.set(name, { generation: service.generation, resource });
      return resource;
    },
    // A service's change touches its secondary tree too (added, changed or gone).
    touchedBy: (services) => [...services].flatMap((s) => [s, ...FAMILY_SUFFIXES.map((f) => s + f)]),
    forget: () => {},
  };
}
