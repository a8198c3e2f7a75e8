/**
 * Load-aware balancing, run every report interval: the load view (what
 * clients report over LRS) and each load-aware service's tree give new
 * weights per client node (domain/load-plan.ts); a service whose weights
 * changed gets them and is pushed like any other change. Clients of one tree
 * node still share one CLA: the weights are per node, not per client.
 */
import { isLoadAware } from '../domain/load-aware-spec.js';
import { EMPTY_LOAD_PLAN, planLoad, type LoadPlanReport, type LoadPlanState } from '../domain/load-plan.js';
import { LoadView, type ServiceLoadReport } from '../domain/load-view.js';
import type { Placement } from '../domain/locality.js';
import type { ServiceState } from '../domain/mesh.js';

export interface LoadControllerOptions {
  readonly mesh: { list(): readonly ServiceState[]; get(name: string): ServiceState | undefined };
  /** How often clients report and weights are recomputed. */
  readonly intervalMs: number;
  /** Services whose weights changed: push them. */
  readonly notify: (services: readonly string[]) => void;
  readonly now?: () => number;
}

export class LoadController {
  readonly view: LoadView;
  private readonly plans = new Map<string, LoadPlanState>();
  private readonly reports = new Map<string, LoadPlanReport & { readonly at: number }>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly now: () => number;

  constructor(private readonly opts: LoadControllerOptions) {
    this.now = opts.now ?? Date.now;
    // Smoothed over reports; a reporter quiet for three intervals stops counting.
    this.view = new LoadView(3 * opts.intervalMs);
  }

  get intervalMs(): number {
    return this.opts.intervalMs;
  }

  start(): void {
    this.timer ??= setInterval(() => this.tick(), this.opts.intervalMs);
    this.timer.unref?.();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Names of the services clients should report load for (their clusters carry lrs_server). */
  loadAwareServices(): string[] {
    return this.opts.mesh
      .list()
      .filter((s) => isLoadAware(s.spec.loadBalancing.loadAware))
      .map((s) => s.name);
  }

  /** One client's LRS report. */
  record(reporter: string, client: Placement, reports: readonly ServiceLoadReport[]): void {
    this.view.record(reporter, client, reports, this.now());
  }

  forget(reporter: string): void {
    this.view.forget(reporter);
  }

  /** Recomputes every load-aware service's weights; pushes those that changed. */
  tick(): string[] {
    const now = this.now();
    this.view.prune(now);
    const changed: string[] = [];
    for (const service of this.opts.mesh.list()) {
      const previous = this.plans.get(service.name);
      if (!isLoadAware(service.spec.loadBalancing.loadAware) && !previous) continue;
      // A re-created service (a new state object) starts from its plain CLAs.
      const from =
        previous && service.load === previous.load ? previous : { ...EMPTY_LOAD_PLAN, epoch: previous?.epoch ?? 0 };
      const { state, changed: moved, report } = planLoad(service, this.view.offered(service.name, now), from);
      this.plans.set(service.name, state);
      this.reports.set(service.name, { ...report, at: now });
      if (moved || service.load !== state.load) {
        service.setLoad(state.load);
        changed.push(service.name);
      }
    }
    for (const name of [...this.plans.keys()]) {
      if (!this.opts.mesh.get(name)) {
        this.plans.delete(name);
        this.reports.delete(name);
      }
    }
    if (changed.length > 0) this.opts.notify(changed);
    return changed;
  }

  /** The last interval's view of one service (debug and explain). */
  report(
    service: string,
  ):
    | (LoadPlanReport & {
        readonly at: number;
        readonly epoch: number;
        readonly intervalMs: number;
        readonly landedRps: Record<string, number>;
      })
    | undefined {
    const r = this.reports.get(service);
    if (!r) return undefined;
    return {
      ...r,
      epoch: this.plans.get(service)?.epoch ?? 0,
      intervalMs: this.opts.intervalMs,
      landedRps: Object.fromEntries(this.view.landed(service, this.now())),
    };
  }
}
