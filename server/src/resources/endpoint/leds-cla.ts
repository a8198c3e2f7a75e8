/**
 * The ClusterLoadAssignment an Envoy sidecar on LEDS gets: one
 * LocalityLbEndpoints per (locality, priority, collection) naming its
 * endpoint collection instead of listing endpoints, plus the same policy as
 * the full CLA. Built from the health-blind structure, cached per
 * (service, structure version, plan key): a health flip is a cache hit.
 * Services with a locality policy are not served this way (a policy may keep
 * part of a leaf, which a collection cannot express), nor services that park
 * their unhealthy endpoints (`unhealthy: park`: a health flip moves an
 * endpoint between priorities, which collections per leaf cannot follow):
 * their Envoy clients get the full CLA, the same as on SotW.
 */
import type { Client } from '../../domain/client.js';
import { LedsStructure, type LedsPiece } from '../../domain/leds-structure.js';
import type { ServiceState } from '../../domain/mesh.js';
import { hasPolicy } from '../../domain/policy.js';
import { unhealthyOf } from '../../domain/upstream.js';
import { encodeMessage } from '../../wire/protos.js';
import { combineDigests, fastDigest, type Rope } from '../../wire/rope.js';
import { fieldSize, utf8Bytes, WireWriter } from '../../wire/wire.js';
import { collectionName } from './leds-names.js';
import { makeResource, type Resource } from '../resource.js';
import { ENDPOINT_TYPE } from '../type-urls.js';

interface ServiceLedsClas {
  readonly structure: LedsStructure;
  version: number;
  readonly byKey: Map<string, Resource>;
}

/** Encoded pieces are content-keyed, so they outlive structure changes; the cache is bounded by clearing. */
const MAX_PIECES = 100_000;

/** One encoded `endpoints` field (tag, length, LocalityLbEndpoints) and its digest. */
interface Piece {
  readonly field: Uint8Array;
  readonly digest: number;
}

/** Priority and weight as one Map key: a number when both fit exactly (no string built per piece). */
function pieceKey(priority: number, weight: number): number | string {
  return Number.isInteger(weight) &&
    weight >= 0 &&
    weight < 2 ** 32 &&
    Number.isInteger(priority) &&
    priority >= 0 &&
    priority < 2 ** 20
    ? priority * 2 ** 32 + weight
    : `${priority}:${weight}`;
}

/** A LEDS CLA as references to cached pieces: thousands of CLAs share one encoding of each piece. */
function claRope(parts: readonly Uint8Array[], digests: readonly number[]): Rope {
  let length = 0;
  for (const p of parts) length += p.length;
  const digest = combineDigests(digests);
  return {
    length,
    digest,
    copyTo(dst, at) {
      for (const p of parts) {
        dst.set(p, at);
        at += p.length;
      }
      return at;
    },
  };
}

export class LedsClaCache {
  private readonly services = new Map<string, ServiceLedsClas>();
  /** collection name → priority and weight (pieceKey) → piece. */
  private readonly pieces = new Map<string, Map<number | string, Piece>>();
  private pieceCount = 0;
  /** Collection names by leaf array (the structure reuses one array per leaf). */
  private readonly names = new WeakMap<readonly string[], string>();
  hits = 0;
  misses = 0;

  /** The LEDS CLA for this client, or undefined when the service is served with full CLAs only. */
  lookup(state: ServiceState, client: Client): Resource | undefined {
    if (hasPolicy(state.spec.loadBalancing.policy)) return undefined;
    // `unhealthy: park` moves endpoints between priorities on a health flip: the full CLA does that.
    if (unhealthyOf(state.spec) === 'park') return undefined;
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
    const plan = held.structure.planFor(client);
    const key = plan.key;
    const hit = held.byKey.get(key);
    if (hit) {
      this.hits++;
      return hit;
    }
    this.misses++;
    const pieces = plan.pieces();
    const r = makeResource(state.name, ENDPOINT_TYPE, this.encode(state, pieces));
    held.byKey.set(key, r);
    return r;
  }

  forget(service: string): void {
    this.services.delete(service);
  }

  private encode(state: ServiceState, pieces: readonly LedsPiece[]): Rope {
    const name = utf8Bytes(state.name);
    const factor = state.spec.loadBalancing.overprovisioningFactor;
    const policy = encodeMessage('envoy.config.endpoint.v3.ClusterLoadAssignment.Policy', {
      overprovisioning_factor: { value: factor },
    });
    const head = new WireWriter(fieldSize(1, name.length)).bytes(1, name).finish();
    const tail = new WireWriter(fieldSize(4, policy.length)).bytes(4, policy).finish();
    const parts = [head];
    const digests = [fastDigest(head)];
    for (const p of pieces) {
      const piece = this.piece(state.name, p);
      parts.push(piece.field);
      digests.push(piece.digest);
    }
    parts.push(tail);
    digests.push(fastDigest(tail));
    return claRope(parts, digests);
  }

  /** One LocalityLbEndpoints as an `endpoints` field, encoded once per distinct content. */
  private piece(service: string, p: LedsPiece): Piece {
    let collection = this.names.get(p.leaf);
    if (collection === undefined) this.names.set(p.leaf, (collection = collectionName(service, p.leaf)));
    let byWeight = this.pieces.get(collection);
    if (!byWeight) this.pieces.set(collection, (byWeight = new Map()));
    const key = pieceKey(p.priority, p.weight);
    let piece = byWeight.get(key);
    if (!piece) {
      if (this.pieceCount >= MAX_PIECES) {
        this.pieces.clear();
        this.pieceCount = 0;
        this.pieces.set(collection, byWeight);
      }
      const l = p.locality;
      const body = encodeMessage('envoy.config.endpoint.v3.LocalityLbEndpoints', {
        locality: { region: l.region, zone: l.zone, sub_zone: l.subzone },
        priority: p.priority,
        load_balancing_weight: { value: p.weight },
        leds_cluster_locality_config: {
          leds_config: { ads: {}, resource_api_version: 'V3' },
          leds_collection_name: collection,
        },
      });
      const field = new WireWriter(fieldSize(2, body.length)).bytes(2, body).finish();
      piece = { field, digest: fastDigest(field) };
      byWeight.set(key, piece);
      this.pieceCount++;
    }
    return piece;
  }
}
