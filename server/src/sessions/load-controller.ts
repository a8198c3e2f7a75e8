/**
 * Load-aware balancing, run every report interval: the load view (what
 * clients report over LRS) and each load-aware service's tree give new
 * weights per client node (domain/load/load-plan.ts); a service whose weights
 * changed gets them and is pushed like any other change. Clients of one tree
 * node still share one CLA: the weights are per node, not per client.
 *
 * With a LoadShare (replicas on etcd), intervals are aligned to the wall
 * clock: at the start of each one every replica publishes its aggregate
 * (domain/load/load-aggregate.ts); half an interval later each plans from the sum
 * of the records of that interval, starting from the eldest replica's plan
 * state, so all replicas send the same weights.
 */
import {
  eldest,
  exportPlan,
  importPlan,
  offeredByPath,
  periodRecords,
  sumService,
  type LoadShare,
  type OfferedAt,
  type ReplicaLoad,
  type ServiceAggregate,
} from '../domain/load/load-aggregate.js';
import { isLoadAware } from '../domain/load/load-aware-spec.js';
import {
  EMPTY_LOAD_PLAN,
  planLoad,
  WEIGHT_SCALE,
  type LoadPlanReport,
  type LoadPlanState,
} from '../domain/load/load-plan.js';
import {
  PLAN_RECORD_FORMAT,
  planRecordOf,
  restorePlan,
  type PlanRecord,
  type ServicePlanRecord,
} from '../domain/load/load-plan-record.js';
import { LoadView, type ServiceLoadReport } from '../domain/load/load-view.js';
import { pathOf, type Placement } from '../domain/locality.js';
import type { ServiceState } from '../domain/mesh.js';
import { CodedError } from '../domain/errors.js';

export interface LoadControllerOptions {
  readonly mesh: { list(): readonly ServiceState[]; get(name: string): ServiceState | undefined };
  /** How often clients report and weights are recomputed. */
  readonly intervalMs: number;
  /** Services whose weights changed: push them. */
  readonly notify: (services: readonly string[]) => void;
  readonly now?: () => number;
  /** Replicas sharing their aggregates (etcd); without it this replica plans from its own clients. */
  readonly share?: LoadShare;
  /** Each publish's outcome (undefined: written). On a failure planning goes on from what is known. */
  readonly onPublished?: (err: unknown) => void;
  /** After every interval's plan: where the plans are kept for a restart (serve/load-keep.ts). */
  readonly onPlanned?: () => void;
}

/** With replicas: the interval planned, each replica's offered load in it, and whose plan state was followed. */
export interface SharedInterval {
  /** This replica's name in etcd. */
  readonly replica: string;
  /** The interval's number (wall-clock milliseconds / interval). */
  readonly period: number;
  readonly replicas: readonly { readonly replica: string; readonly offeredRps: number }[];
  readonly followed?: string;
}

export type LoadReport = LoadPlanReport & {
  readonly at: number;
  readonly epoch: number;
  readonly intervalMs: number;
  readonly landedRps: Record<string, number>;
  readonly shared?: SharedInterval;
};

interface PlanInputs {
  readonly offered: readonly OfferedAt[];
  /** The plan state to start from, when not this replica's own (the eldest replica's). */
  readonly previous?: Pick<LoadPlanState, 'shares' | 'drained'>;
  readonly landed?: ReadonlyMap<string, number>;
  readonly shared?: SharedInterval;
}

/** How long a plan kept from before a restart is served while no client reports (see `holding`). */
const HOLD_INTERVALS = 5;
const HOLD_MIN_MS = 30_000;

export class LoadController {
  readonly view: LoadView;
  private readonly plans = new Map<string, LoadPlanState>();
  private readonly reports = new Map<string, LoadReport>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly now: () => number;
  /** Shared mode: this replica's record of the current period, and the first period it published. */
  private own: ReplicaLoad | undefined;
  private since: number | undefined;
  /** Plans kept from before a restart, by service, not yet taken up (a service the mesh does not hold yet). */
  private kept = new Map<string, ServicePlanRecord>();
  /** Services serving a kept plan unchanged: since when, and the first interval that had reports for them. */
  private readonly held = new Map<string, { readonly since: number; reported?: number }>();

  constructor(private readonly opts: LoadControllerOptions) {
    this.now = opts.now ?? Date.now;
    // Smoothed over reports; a reporter quiet for three intervals stops counting.
    this.view = new LoadView(3 * opts.intervalMs);
  }

  get intervalMs(): number {
    return this.opts.intervalMs;
  }

  start(): void {
    if (this.timer) return;
    if (!this.opts.share) {
      this.timer = setInterval(() => this.tick(), this.opts.intervalMs);
      this.timer.unref?.();
      return;
    }
    // Half-interval steps on the wall clock: publish on the interval's start, plan at its middle.
    const step = (): void => {
      const half = this.opts.intervalMs / 2;
      const now = this.now();
      const next = (Math.floor(now / half) + 1) * half;
      this.timer = setTimeout(() => {
        const slot = Math.round(next / half);
        if (slot % 2 === 0) this.publish(slot / 2);
        else this.planShared((slot - 1) / 2);
        step();
      }, next - now);
      this.timer.unref?.();
    };
    step();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
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

  /** Recomputes every load-aware service's weights from this replica's clients; pushes those that changed. */
  tick(): string[] {
    const now = this.now();
    this.view.prune(now);
    return this.planAll(now, (service) => ({ offered: this.localOffered(service, now) }));
  }

  /** Shared mode, start of an interval: this replica's aggregate per load-aware service, with its plan state. */
  publish(period: number): ReplicaLoad {
    const now = this.now();
    this.view.prune(now);
    this.since ??= period;
    const services: ServiceAggregate[] = [];
    for (const service of this.opts.mesh.list()) {
      if (!isLoadAware(service.spec.loadBalancing.loadAware)) continue;
      const plan = this.plans.get(service.name);
      services.push({
        service: service.name,
        scopes: [...service.tree.scopes],
        offered: this.localOffered(service, now),
        landed: Object.fromEntries(this.view.landed(service.name, now)),
        ...(plan && plan.load === service.load ? { plan: exportPlan(service.tree, plan) } : {}),
      });
    }
    const own: ReplicaLoad = {
      replica: this.opts.share?.replica ?? 'local',
      period,
      at: now,
      intervalMs: this.opts.intervalMs,
      since: this.since,
      services,
    };
    this.own = own;
    // Nothing load-aware: nothing to write (a record stops counting two intervals after its last write).
    if (services.length === 0) return own;
    this.opts.share?.publish(own).then(
      () => this.opts.onPublished?.(undefined),
      (err: unknown) => this.opts.onPublished?.(err ?? new CodedError('CANOPY_PEER_FAILED', 'publish failed')),
    );
    return own;
  }

  /** Shared mode, middle of an interval: every replica plans from the same records. */
  planShared(period: number): string[] {
    const share = this.opts.share;
    const mine = this.own && this.own.period >= period - 1 ? [this.own] : [];
    const others = share ? share.others().filter((r) => r.replica !== share.replica) : [];
    const records = periodRecords([...mine, ...others], period);
    const elder = eldest(records);
    return this.planAll(this.now(), (service) => {
      const sum = sumService(records, service.name, service.tree.scopes);
      const shared: SharedInterval = {
        replica: share?.replica ?? 'local',
        period,
        replicas: sum.byReplica,
        ...(elder ? { followed: elder.replica } : {}),
      };
      const base = { offered: sum.offered, landed: sum.landed, shared };
      if (!elder) return base;
      const plan = elder.services.find((s) => s.service === service.name)?.plan;
      // The eldest replica's state, even when empty: every replica then starts from the same place.
      return { ...base, previous: plan ? importPlan(service.tree, plan) : { shares: new Map(), drained: new Set() } };
    });
  }

  private localOffered(service: ServiceState, now: number): OfferedAt[] {
    const scopes = service.tree.scopes;
    return offeredByPath(
      this.view.offered(service.name, now).map((o) => ({ path: pathOf(scopes, o.client), rps: o.rps })),
    );
  }

  private planAll(now: number, inputs: (service: ServiceState) => PlanInputs): string[] {
    const changed: string[] = [];
    for (const service of this.opts.mesh.list()) {
      if (this.takeKept(service, now)) changed.push(service.name);
      const previous = this.plans.get(service.name);
      if (!isLoadAware(service.spec.loadBalancing.loadAware) && !previous) continue;
      const input = inputs(service);
      if (this.holding(service, input.offered, now)) continue;
      // A re-created service (a new state object) starts from its plain CLAs.
      const own =
        previous && service.load === previous.load ? previous : { ...EMPTY_LOAD_PLAN, epoch: previous?.epoch ?? 0 };
      // What was sent (own.load) stays this replica's; the damping state may be the eldest replica's.
      const from = input.previous ? { ...own, ...input.previous } : own;
      const { state, changed: moved, report } = planLoad(service, input.offered, from);
      this.plans.set(service.name, state);
      this.reports.set(service.name, {
        ...report,
        at: now,
        epoch: state.epoch,
        intervalMs: this.opts.intervalMs,
        landedRps: Object.fromEntries(input.landed ?? this.view.landed(service.name, now)),
        ...(input.shared ? { shared: input.shared } : {}),
      });
      if (moved || service.load !== state.load) {
        service.setLoad(state.load);
        changed.push(service.name);
      }
    }
    for (const name of [...this.plans.keys()]) {
      if (!this.opts.mesh.get(name)) {
        this.plans.delete(name);
        this.reports.delete(name);
        this.held.delete(name);
      }
    }
    if (changed.length > 0) this.opts.notify(changed);
    this.opts.onPlanned?.();
    return changed;
  }

  /**
   * Takes up the plans kept before a restart: each load-aware service the mesh holds serves its kept
   * weights at once, before any client has reported again (a service that appears later takes its plan
   * when it does). Returns the services whose weights were set.
   */
  restore(record: PlanRecord): string[] {
    this.kept = new Map(Object.entries(record.services));
    const now = this.now();
    return this.opts.mesh.list().flatMap((s) => (this.takeKept(s, now) ? [s.name] : []));
  }

  /** What to keep for a restart: every load-aware service's plan that gives weights. */
  planRecord(): PlanRecord {
    const services: Record<string, ServicePlanRecord> = {};
    for (const service of this.opts.mesh.list()) {
      const plan = this.plans.get(service.name);
      if (!plan?.load || plan.load !== service.load || !isLoadAware(service.spec.loadBalancing.loadAware)) continue;
      services[service.name] = planRecordOf(service.tree, plan);
    }
    return { format: PLAN_RECORD_FORMAT, at: this.now(), services };
  }

  private takeKept(service: ServiceState, now: number): boolean {
    const kept = this.kept.get(service.name);
    if (!kept) return false;
    this.kept.delete(service.name);
    if (this.plans.has(service.name) || !isLoadAware(service.spec.loadBalancing.loadAware)) return false;
    const state = restorePlan(service.tree, kept, WEIGHT_SCALE);
    if (!state) return false;
    this.plans.set(service.name, state);
    this.held.set(service.name, { since: now });
    service.setLoad(state.load);
    return true;
  }

  /**
   * A kept plan is served unchanged until the service's clients have reported again for a whole interval
   * (a plan from one partial interval of reports, or from none, would move every weight). Clients take a
   * few seconds to open their load report streams again (Envoy's backoff), so the hold lasts up to
   * HOLD_INTERVALS intervals, and at least HOLD_MIN_MS, when no report comes.
   */
  private holding(service: ServiceState, offered: readonly OfferedAt[], now: number): boolean {
    const hold = this.held.get(service.name);
    if (!hold) return false;
    const interval = this.opts.intervalMs;
    if (offered.length > 0) hold.reported ??= now;
    const done =
      service.load !== this.plans.get(service.name)?.load ||
      now - hold.since >= Math.max(HOLD_INTERVALS * interval, HOLD_MIN_MS) ||
      (hold.reported !== undefined && now - hold.reported >= interval);
    if (done) this.held.delete(service.name);
    return !done;
  }

  /** The last interval's view of one service (debug and explain). */
  report(service: string): LoadReport | undefined {
    return this.reports.get(service);
  }
}
