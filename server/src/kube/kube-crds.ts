/**
 * Policies the Kubernetes source reads live when their CRDs are installed
 * (Istio's DestinationRule, Kuma's MeshLoadBalancingStrategy), and how it
 * notices them: API discovery (`/apis`, which every authenticated client may
 * read, so no RBAC on CustomResourceDefinitions) at start, then again with
 * jittered exponential backoff (1 s up to a ceiling) while any is missing. A
 * CRD installed after Canopy started is read from the next check on.
 */
import { ApisApi, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { ExponentialBackoff, type IBackoff } from 'cockatiel';
import type { Logger } from 'pino';

/** A kind of policy read live: where it is served, and what a change of one touches. */
export interface LivePolicies {
  readonly kind: 'destinationrule' | 'meshloadbalancingstrategy';
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  /** For the log, e.g. `Istio DestinationRules`. */
  readonly what: string;
  /** Keeps or drops a policy; returns the Services (`serviceKey`, or `*` for every one) it may change. */
  change(o: KubernetesObject, present: boolean): string[];
}

/** A key `change` returns (`web.shop`, policy/k8s-live.ts serviceKey) → `shop/web`, as the source keys Services. */
export function byName(key: string): string {
  const dot = key.indexOf('.');
  return `${key.slice(dot + 1)}/${key.slice(0, dot)}`;
}

export interface CrdDiscoveryOptions {
  readonly config: KubeConfig;
  readonly kinds: readonly LivePolicies[];
  /** Called once per kind when the API server first serves it. */
  readonly served: (kind: LivePolicies) => void;
  readonly log: Logger;
  /** Re-checks back off from 1 s to at most this (default 60 s). */
  readonly maxDelayMs?: number;
}

export class CrdDiscovery {
  private missing: LivePolicies[];
  private readonly factory: ExponentialBackoff<unknown>;
  private backoff: IBackoff<unknown> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly opts: CrdDiscoveryOptions) {
    this.missing = [...opts.kinds];
    const maxDelay = opts.maxDelayMs ?? 60_000;
    this.factory = new ExponentialBackoff({ initialDelay: Math.min(1000, maxDelay), maxDelay });
  }

  /** The first check: resolves once it has called `served` for what is installed now. */
  start(): Promise<void> {
    return this.check();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** The kinds not served yet. */
  get waiting(): readonly LivePolicies[] {
    return this.missing;
  }

  private async check(): Promise<void> {
    try {
      const { groups } = await this.opts.config.makeApiClient(ApisApi).getAPIVersions();
      if (this.stopped) return;
      const served = this.missing.filter((k) =>
        groups.some((g) => g.name === k.group && g.versions.some((v) => v.version === k.version)),
      );
      this.missing = this.missing.filter((k) => !served.includes(k));
      for (const k of served) this.opts.served(k);
    } catch (err) {
      this.opts.log.warn({ err }, 'kubernetes: API discovery failed: checking again for the policy CRDs');
    }
    if (this.missing.length === 0 || this.stopped) return;
    this.backoff = (this.backoff ?? this.factory).next(undefined);
    this.timer = setTimeout(() => void this.check(), this.backoff.duration);
    this.timer.unref();
  }
}

/**
 * An object's creation time as text that sorts by time (ISO 8601), for "the older policy wins": the client
 * library hands `creationTimestamp` over as a Date, whose own string form starts with the weekday.
 */
export function createdAt(o: KubernetesObject): string {
  const t = o.metadata?.creationTimestamp as unknown;
  return t instanceof Date ? t.toISOString() : String(t ?? '');
}
