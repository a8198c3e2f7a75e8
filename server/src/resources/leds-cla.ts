/**
 * The ClusterLoadAssignment an Envoy sidecar on LEDS gets: one
 * LocalityLbEndpoints per (locality, priority, collection) naming its
 * endpoint collection instead of listing endpoints, plus the same policy as
 * the full CLA. Built from the health-blind structure, cached per
 * (service, structure version, plan key): a health flip is a cache hit.
 * Services with a locality policy are not served this way (a policy may keep
 * part of a leaf, which a collection cannot express): their Envoy clients get
 * the full CLA.
 */
import type { Client } from '../domain/client.js';
import { LedsStructure, type LedsPiece } from '../domain/leds-structure.js';
import type { ServiceState } from '../domain/mesh.js';
import { hasPolicy } from '../domain/policy.js';
import { encodeMessage } from '../wire/protos.js';
import { fieldSize, utf8Bytes, WireWriter } from '../wire/wire.js';
import { collectionName } from './leds-names.js';
import { makeResource, type Resource } from './resource.js';
import { ENDPOINT_TYPE } from './type-urls.js';

interface ServiceLedsClas {
  readonly structure: LedsStructure;
  version: number;
  readonly byKey: Map<string, Resource>;
}

/** Encoded pieces are content-keyed, so they outlive structure changes; the map is bounded by clearing. */
const MAX_PIECES = 100_000;

export class LedsClaCache {
  private readonly services = new Map<string, ServiceLedsClas>();
  private readonly pieces = new Map<string, Uint8Array>();
  hits = 0;
  misses = 0;

  /** The LEDS CLA for this client, or undefined when the service is served with full CLAs only. */
  lookup(state: ServiceState, client: Client): Resource | undefined {
    if (hasPolicy(state.spec.loadBalancing.policy)) return undefined;
    let held = this.services.get(state.name);
    if (held?.structure.state !== state) {
      held = { structure: new LedsStructure(state), version: -1, byKey: new Map() };
      this.services.set(state.name, held);
    }
    held.structure.sync();
    if (held.version !== held.structure.version) {
      held.byKey.clear();
      held.version = held.structure.version;
    }
    const key = held.structure.keyFor(client);
    const hit = held.byKey.get(key);
    if (hit) {
      this.hits++;
      return hit;
    }
    this.misses++;
    const pieces = held.structure.piecesFor(client);
    const r = makeResource(state.name, ENDPOINT_TYPE, this.encode(state, pieces));
    held.byKey.set(key, r);
    return r;
  }

  forget(service: string): void {
    this.services.delete(service);
  }

  private encode(state: ServiceState, pieces: readonly LedsPiece[]): Uint8Array {
    const name = utf8Bytes(state.name);
    const encoded = pieces.map((p) => this.piece(state.name, p));
    const factor = state.spec.loadBalancing.overprovisioningFactor;
    const policy = encodeMessage('envoy.config.endpoint.v3.ClusterLoadAssignment.Policy', {
      overprovisioning_factor: { value: factor },
    });
    let size = fieldSize(1, name.length) + fieldSize(4, policy.length);
    for (const e of encoded) size += fieldSize(2, e.length);
    const w = new WireWriter(size).bytes(1, name);
    for (const e of encoded) w.bytes(2, e);
    return w.bytes(4, policy).finish();
  }

  /** One LocalityLbEndpoints, encoded once per distinct content. */
  private piece(service: string, p: LedsPiece): Uint8Array {
    const collection = collectionName(service, p.leaf);
    const l = p.locality;
    const key = `${p.priority}\u0000${p.weight}\u0000${l.region}\u0000${l.zone}\u0000${l.subzone}\u0000${collection}`;
    let bytes = this.pieces.get(key);
    if (!bytes) {
      if (this.pieces.size >= MAX_PIECES) this.pieces.clear();
      bytes = encodeMessage('envoy.config.endpoint.v3.LocalityLbEndpoints', {
        locality: { region: l.region, zone: l.zone, sub_zone: l.subzone },
        priority: p.priority,
        load_balancing_weight: { value: p.weight },
        leds_cluster_locality_config: {
          leds_config: { ads: {}, resource_api_version: 'V3' },
          leds_collection_name: collection,
        },
      });
      this.pieces.set(key, bytes);
    }
    return bytes;
  }
}
