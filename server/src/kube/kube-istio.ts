/**
 * Istio DestinationRules for the Kubernetes source, read live when Istio's
 * CRDs are installed (kube/kube-crds.ts notices them): each
 * rule is kept under the Service its host names (policy/k8s-live.ts
 * destinationRuleTarget); two rules for one Service: the older wins, as in
 * Istio.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { destinationRuleTarget, type LiveDestinationRule } from '../policy/k8s-live.js';
import type { Obj } from '../policy/documents.js';
import { createdAt, type LivePolicies } from './kube-crds.js';

export const ISTIO_GROUP = 'networking.istio.io';

interface Held extends LiveDestinationRule {
  readonly id: string;
  readonly created: string;
}

export class DestinationRules implements LivePolicies {
  readonly kind = 'destinationrule';
  readonly group = ISTIO_GROUP;
  readonly version = 'v1';
  readonly plural = 'destinationrules';
  readonly what = 'Istio DestinationRules';
  private readonly byService = new Map<string, Held[]>();
  private readonly target = new Map<string, string>();

  /** The rule that applies to a Service (`serviceKey`). */
  get(key: string): LiveDestinationRule | undefined {
    return this.byService.get(key)?.[0];
  }

  /** Keeps (or drops) a rule; returns the Services whose rule may have changed. */
  change(obj: KubernetesObject, present: boolean): string[] {
    const o = obj as KubernetesObject & { spec?: Obj };
    const ns = o.metadata?.namespace ?? '';
    const id = `${ns}/${o.metadata?.name}`;
    const touched: string[] = [];
    const was = this.target.get(id);
    if (was !== undefined) {
      this.byService.set(
        was,
        (this.byService.get(was) ?? []).filter((r) => r.id !== id),
      );
      this.target.delete(id);
      touched.push(was);
    }
    const host = o.spec?.['host'];
    const key = present && typeof host === 'string' ? destinationRuleTarget(host, ns) : undefined;
    if (key === undefined) return touched;
    const held: Held = {
      id,
      at: `DestinationRule ${id}`,
      spec: o.spec ?? {},
      created: createdAt(o),
    };
    const list = [...(this.byService.get(key) ?? []), held].sort((a, b) => a.created.localeCompare(b.created));
    this.byService.set(key, list);
    this.target.set(id, key);
    if (!touched.includes(key)) touched.push(key);
    return touched;
  }
}
