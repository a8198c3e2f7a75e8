/**
 * How many times a service of each name was deleted in this process. A
 * re-created service's RouteConfiguration carries it, so it differs from the
 * deleted one in what clients parse: gRPC C-core keeps a route it saw, ignores
 * an identical one, and would never leave the "listener does not exist" state.
 * Replicas agree until one of them sees a deletion the other did not (then RDS
 * versions differ once).
 */
const MAX_REMEMBERED = 10_000;

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
}
