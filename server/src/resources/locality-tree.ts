/**
 * canopy.v1.LocalityTree: a service's compiled tree for node agents, encoded
 * once per service generation and sent to every agent as the same bytes
 * (a load plan's new epoch is a new generation; an unchanged plan, unchanged bytes). Only
 * services the kernel can intercept (an IPv4 VIP and a port) have one.
 */
import type { Mesh, ServiceState } from '../domain/mesh.js';
import { makeResource, type Resource } from './resource.js';
import { servicesAsNames, type ResourceType } from './resource-type.js';
import { encodeLocalityTree, kernelServable } from './tree-codec.js';
import { treeSpills } from './tree-spill.js';
import { TREE_TYPE } from './type-urls.js';

export function localityTreeType(mesh: Mesh): ResourceType {
  const held = new WeakMap<ServiceState, { generation: number; resource: Resource }>();
  return {
    typeUrl: TREE_TYPE,
    shortName: 'TREE',
    // Full state, so an agent unloads a service that is no longer sent.
    fullStateInSotw: true,
    pushRank: 4,
    names: () =>
      mesh
        .list()
        .filter((s) => kernelServable(s.spec))
        .map((s) => s.name),
    resolve(name) {
      const service = mesh.get(name);
      if (!service || !kernelServable(service.spec)) return undefined;
      const hit = held.get(service);
      if (hit?.generation === service.generation) return hit.resource;
      // A load-aware service's tree carries its load plan (setLoad bumps the generation).
      const spills = treeSpills(service.tree, service.load);
      const resource = makeResource(
        service.name,
        TREE_TYPE,
        encodeLocalityTree(service.spec, service.tree.compile(), spills),
      );
      held.set(service, { generation: service.generation, resource });
      return resource;
    },
    touchedBy: servicesAsNames,
    forget: () => {},
  };
}
