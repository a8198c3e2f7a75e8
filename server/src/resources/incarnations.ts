/**
 * How many times a service of each name was deleted in this process. A
 * re-created service's RouteConfiguration carries it, so it differs from the
 * deleted one in what clients parse: gRPC C-core keeps a route it saw, ignores
 * an identical one, and would never leave the "listener does not exist" state.
 * Replicas agree until one of them sees a deletion the other did not (then RDS
 * versions differ once).
 *
 * A proxyless client's route to a re-created service also names the cluster
 * by incarnation (`echo@incarnation-1`): gRPC C-core 1.51, reading the
 * deletion and the re-creation in one batch, drops its cluster watch on the
 * deletion, discards the re-created Cluster (unwatched when it is read), and
 * watches the same name again in a request that, since the unsubscription was
 * never sent, reads to the server as a plain ACK: nothing more would come. A
 * new cluster name is a new subscription, which the server answers.
 * Envoy and a service never deleted keep the service's name.
 */
import type { ClientKind } from '../domain/client.js';

const MAX_REMEMBERED = 10_000;
const SEPARATOR = '@incarnation-';

export class Incarnations {
  private readonly deletions = new Map<string, number>();

  of(name: string): number {
    return this.deletions.get(name) ?? 0;
  }

  deleted(name: string): void {
    const next = this.of(name) + 1;
    this.deletions.delete(name);
    this.deletions.set(name, next);
    // The oldest deletions are forgotten first.
    if (this.deletions.size > MAX_REMEMBERED) this.deletions.delete(this.deletions.keys().next().value!);
  }

  /** The proxyless cluster name of the service as it is now. */
  clusterOf(service: string): string {
    return incarnatedName(service, this.of(service));
  }

  /** The cluster a client of this kind knows the service by: Envoy and the node agent by the service's name. */
  clusterFor(service: string, kind: ClientKind): string {
    return kind === 'grpc' ? this.clusterOf(service) : service;
  }

  /**
   * The cluster names a change to this service may touch: its own, its
   * incarnation's and, since a deletion is counted before it is pushed, the
   * previous incarnation's.
   */
  clusterNames(service: string): string[] {
    const n = this.of(service);
    const names = [service];
    if (n > 0) names.push(incarnatedName(service, n));
    if (n > 1) names.push(incarnatedName(service, n - 1));
    return names;
  }
}

/** `service` for incarnation 0, `service@incarnation-N` after N deletions ('@' is not allowed in a service name). */
export function incarnatedName(service: string, incarnation: number): string {
  return incarnation > 0 ? `${service}${SEPARATOR}${incarnation}` : service;
}

/** The service and incarnation a cluster name stands for; incarnation undefined for a plain service name. */
export function parseIncarnatedName(name: string): { service: string; incarnation?: number } {
  const at = name.lastIndexOf(SEPARATOR);
  if (at < 0) return { service: name };
  const n = Number(name.slice(at + SEPARATOR.length));
  return Number.isSafeInteger(n) && n > 0 ? { service: name.slice(0, at), incarnation: n } : { service: name };
}
