/**
 * An emulation of a stock Envoy's ADS client, kept for fast protocol-level tests (the real Envoy
 * 1.40 confirms its warming and delta rules in e2e/envoy-warming.test.ts and e2e/envoy-delta.test.ts),
 * from its documents and source, over a real SotW or delta stream:
 *
 * - Wildcard CDS and LDS (SotW: empty resource_names; delta: the legacy empty
 *   first request), then EDS for the clusters' service names and RDS for the
 *   listeners' route names, as its watches ask for them.
 * - Warming (xds_protocol.rst, "Resource warming"): a Cluster added or updated
 *   stays warming until a ClusterLoadAssignment for it arrives after the
 *   update; a Listener until its RouteConfiguration does. On delta with LEDS a
 *   cluster also waits for members of each collection its CLA names (a new
 *   EdsClusterImpl has new LEDS watches).
 * - What it sends after an update, per Envoy's source: SotW, an EDS/RDS
 *   request with the union of its watches' names and the last version and
 *   nonce (GrpcMuxImpl::addWatch → queueDiscoveryRequest; unchanged names:
 *   the "re-request"). Delta, a subscribe only for names no watch held before
 *   (WatchMap::updateWatchInterest adds a name once): an update sends nothing.
 *
 * `warming` says what would still be waiting; a server that leaves a cluster
 * there has Envoy 1.40 go live after initial_fetch_timeout: a new cluster with no host, an updated one
 * with the endpoints it had (e2e/envoy-warming-control.test.ts shows both).
 */
import { createHash } from 'node:crypto';
import { envoyType } from '../../server/test/support/envoy-protos.js';
import { RawAdsStream, RawDeltaStream, type RawDeltaResponse, type RawResponse } from './raw-ads.js';

const T = 'type.googleapis.com/envoy.config';
export const LDS = `${T}.listener.v3.Listener`;
export const RDS = `${T}.route.v3.RouteConfiguration`;
export const CDS = `${T}.cluster.v3.Cluster`;
export const EDS = `${T}.endpoint.v3.ClusterLoadAssignment`;
export const LEDS = `${T}.endpoint.v3.LbEndpoint`;
const HCM = 'envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';

type Obj = Record<string, unknown>;

function decode(typeUrl: string, value: Uint8Array): Obj {
  const t = envoyType(typeUrl.slice(typeUrl.lastIndexOf('/') + 1));
  return t.toObject(t.decode(value), { enums: String, longs: Number, arrays: true, defaults: false }) as Obj;
}

const digest = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** The route configuration names an Envoy listener's HTTP connection managers read over RDS. */
function routeNames(listener: Obj): string[] {
  const chains = [...((listener['filter_chains'] as Obj[] | undefined) ?? [])];
  if (listener['default_filter_chain']) chains.push(listener['default_filter_chain'] as Obj);
  const out: string[] = [];
  for (const chain of chains) {
    for (const f of (chain['filters'] as Obj[] | undefined) ?? []) {
      const any = f['typed_config'] as { type_url: string; value: Uint8Array } | undefined;
      if (!any?.type_url.endsWith(HCM)) continue;
      const rds = decode(any.type_url, any.value)['rds'] as Obj | undefined;
      if (rds?.['route_config_name']) out.push(String(rds['route_config_name']));
    }
  }
  return out;
}

/** The glob an xdstp member belongs to: its last path segment replaced by `*`, context parameters kept. */
export function globOfMember(name: string): string {
  const q = name.indexOf('?');
  const base = q < 0 ? name : name.slice(0, q);
  return `${base.slice(0, base.lastIndexOf('/') + 1)}*${q < 0 ? '' : name.slice(q)}`;
}

interface Held {
  /** sha256 of the resource's bytes. */
  digest: string;
  /** What it reads: a cluster's EDS service name, a listener's route names. */
  needs: string[];
}

export interface EnvoyPeerOptions {
  readonly node: Obj;
  readonly protocol: 'sotw' | 'delta';
  /** Appended to every LEDS glob the peer subscribes to (node_context_params, e.g. `?k=v`). */
  readonly ledsContext?: string;
}

export class EnvoyPeer {
  /** `cluster:NAME` or `listener:NAME` for each resource added or updated and not yet warm. */
  readonly warming = new Set<string>();
  /** How many cluster and listener updates (not additions) it has seen. */
  updates = 0;
  readonly clusters = new Map<string, Held>();
  readonly listeners = new Map<string, Held>();
  /** Cluster → LEDS globs it still waits on (delta with LEDS). */
  private readonly ledsWait = new Map<string, Set<string>>();
  /** Cluster → the LEDS globs its CLA names (its LedsSubscriptions, destroyed with it). */
  private readonly ledsOf = new Map<string, string[]>();
  private readonly watched = { eds: new Set<string>(), rds: new Set<string>(), leds: new Set<string>() };
  private readonly last = new Map<string, { version: string; nonce: string }>();
  private readonly sotw?: RawAdsStream;
  private readonly delta?: RawDeltaStream;
  private stopped = false;
  /** Every response handled, for tests that look at what arrived. */
  readonly received: { typeUrl: string; names: string[]; removed: string[] }[] = [];

  constructor(
    address: string,
    private readonly opts: EnvoyPeerOptions,
  ) {
    if (opts.protocol === 'sotw') this.sotw = new RawAdsStream(address);
    else this.delta = new RawDeltaStream(address);
  }

  /** Opens CDS and LDS as Envoy does, then handles every response until `close`. */
  start(): void {
    const node = this.opts.node;
    if (this.sotw) {
      this.sotw.send({ node, type_url: CDS, resource_names: [] });
      this.sotw.send({ type_url: LDS, resource_names: [] });
    } else {
      this.delta!.send({ node, type_url: CDS });
      this.delta!.send({ type_url: LDS });
    }
    void this.loop();
  }

  /** Resolves once `pred` holds, or rejects after `ms` with what is still warming. */
  async until(pred: () => boolean, ms: number, what: string): Promise<void> {
    const end = Date.now() + ms;
    while (!pred()) {
      if (Date.now() > end)
        throw new Error(`${what} not within ${ms} ms; warming: ${[...this.warming].join(', ') || 'none'}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  close(): void {
    this.stopped = true;
    this.sotw?.close();
    this.delta?.close();
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      const r = await (this.sotw ?? this.delta)!.maybeNext(200);
      if (!r) continue;
      if (this.sotw) this.onSotw(r as RawResponse);
      else this.onDelta(r as RawDeltaResponse);
    }
  }

  private onSotw(r: RawResponse): void {
    const s = this.sotw!;
    const resources = r.resources.map((a) => ({ value: a.value, obj: decode(r.type_url, a.value) }));
    const names = resources.map((x) => String(x.obj[r.type_url === EDS ? 'cluster_name' : 'name']));
    this.received.push({ typeUrl: r.type_url, names, removed: [] });
    this.last.set(r.type_url, { version: r.version_info, nonce: r.nonce });
    if (r.type_url === CDS || r.type_url === LDS) {
      const child = r.type_url === CDS ? EDS : RDS;
      const watched = r.type_url === CDS ? this.watched.eds : this.watched.rds;
      const updated = this.applyFullState(r.type_url, resources);
      const wanted = new Set(
        [...(r.type_url === CDS ? this.clusters : this.listeners).values()].flatMap((h) => h.needs),
      );
      const changed = wanted.size !== watched.size || [...wanted].some((n) => !watched.has(n));
      watched.clear();
      for (const n of wanted) watched.add(n);
      // A new or updated Cluster adds its EDS watch: the request goes out with the union of names and the
      // last EDS version and nonce, whether or not the names changed (GrpcMuxImpl::addWatch). A Listener's
      // RDS subscription is shared by name (RdsRouteConfigProviderImpl), so only new names ask for RDS.
      if (changed || (child === EDS && updated)) {
        const l = this.last.get(child);
        s.send({
          type_url: child,
          resource_names: [...wanted].sort(),
          version_info: l?.version ?? '',
          response_nonce: l?.nonce ?? '',
        });
      }
      s.send({ type_url: r.type_url, resource_names: [], version_info: r.version_info, response_nonce: r.nonce });
      return;
    }
    const watched = r.type_url === EDS ? this.watched.eds : this.watched.rds;
    s.send({
      type_url: r.type_url,
      resource_names: [...watched].sort(),
      version_info: r.version_info,
      response_nonce: r.nonce,
    });
    this.childArrived(
      r.type_url,
      names,
      resources.map((x) => x.obj),
    );
  }

  /** SotW LDS/CDS: the full state; returns whether a resource held before was updated. */
  private applyFullState(typeUrl: string, resources: { value: Uint8Array; obj: Obj }[]): boolean {
    const map = typeUrl === CDS ? this.clusters : this.listeners;
    const seen = new Set<string>();
    let updated = false;
    for (const { value, obj } of resources) {
      const name = String(obj['name']);
      seen.add(name);
      updated = this.hold(typeUrl, name, value, obj) || updated;
    }
    for (const name of [...map.keys()]) if (!seen.has(name)) this.drop(typeUrl, name);
    return updated;
  }

  /** Takes a Cluster or Listener; returns true for an update of one held before (bytes changed). */
  private hold(typeUrl: string, name: string, value: Uint8Array, obj: Obj): boolean {
    const map = typeUrl === CDS ? this.clusters : this.listeners;
    const d = digest(value);
    const before = map.get(name);
    if (before?.digest === d) return false;
    // Only an EDS cluster waits for a CLA; STRICT_DNS and LOGICAL_DNS ones carry their endpoints (and warm on
    // their first DNS resolution, which this peer does not make).
    const needs =
      typeUrl === CDS
        ? obj['type'] === 'EDS'
          ? [String((obj['eds_cluster_config'] as Obj | undefined)?.['service_name'] || name)]
          : []
        : routeNames(obj);
    map.set(name, { digest: d, needs });
    const key = `${typeUrl === CDS ? 'cluster' : 'listener'}:${name}`;
    // A listener that reads no RouteConfiguration (tcp_proxy) is warm at once.
    if (needs.length > 0) this.warming.add(key);
    else this.warming.delete(key);
    if (before) this.updates++;
    return before !== undefined;
  }

  private drop(typeUrl: string, name: string): void {
    (typeUrl === CDS ? this.clusters : this.listeners).delete(name);
    this.warming.delete(`${typeUrl === CDS ? 'cluster' : 'listener'}:${name}`);
    this.ledsWait.delete(name);
    const globs = this.ledsOf.get(name);
    this.ledsOf.delete(name);
    const still = new Set([...this.ledsOf.values()].flat());
    const gone = (globs ?? []).filter((g) => !still.has(g));
    for (const g of gone) this.watched.leds.delete(g);
    if (gone.length > 0) this.delta?.send({ type_url: LEDS, resource_names_unsubscribe: gone });
  }

  /** A CLA or RouteConfiguration arrived: what was waiting for it is warm (on LEDS, once its members come). */
  private childArrived(typeUrl: string, names: readonly string[], objs: readonly Obj[]): void {
    const parents = typeUrl === EDS ? this.clusters : this.listeners;
    const prefix = typeUrl === EDS ? 'cluster' : 'listener';
    names.forEach((child, i) => {
      for (const [parent, held] of parents) {
        if (!held.needs.includes(child) || !this.warming.has(`${prefix}:${parent}`)) continue;
        const globs = typeUrl === EDS ? ledsGlobs(objs[i]!, this.opts.ledsContext ?? '') : [];
        if (globs.length === 0) {
          this.warming.delete(`${prefix}:${parent}`);
          continue;
        }
        this.ledsWait.set(parent, new Set(globs));
        this.ledsOf.set(parent, globs);
        const fresh = globs.filter((g) => !this.watched.leds.has(g));
        for (const g of fresh) this.watched.leds.add(g);
        if (fresh.length > 0) this.delta!.send({ type_url: LEDS, resource_names_subscribe: fresh });
      }
    });
  }

  private onDelta(r: RawDeltaResponse): void {
    const d = this.delta!;
    const names = r.resources.map((x) => x.name);
    this.received.push({ typeUrl: r.type_url, names, removed: r.removed_resources });
    if (r.type_url === CDS || r.type_url === LDS) {
      const child = r.type_url === CDS ? EDS : RDS;
      const watched = r.type_url === CDS ? this.watched.eds : this.watched.rds;
      for (const x of r.resources)
        this.hold(r.type_url, x.name, x.resource!.value, decode(r.type_url, x.resource!.value));
      for (const n of r.removed_resources) this.drop(r.type_url, n);
      const wanted = new Set(
        [...(r.type_url === CDS ? this.clusters : this.listeners).values()].flatMap((h) => h.needs),
      );
      // Only names no watch held before go out (WatchMap::updateWatchInterest): an update sends nothing.
      const subscribe = [...wanted].filter((n) => !watched.has(n));
      const unsubscribe = [...watched].filter((n) => !wanted.has(n));
      watched.clear();
      for (const n of wanted) watched.add(n);
      if (subscribe.length || unsubscribe.length) {
        d.send({ type_url: child, resource_names_subscribe: subscribe, resource_names_unsubscribe: unsubscribe });
      }
      d.send({ type_url: r.type_url, response_nonce: r.nonce });
      return;
    }
    d.send({ type_url: r.type_url, response_nonce: r.nonce });
    if (r.type_url === LEDS) {
      const globs = new Set(names.map(globOfMember));
      for (const [cluster, wait] of this.ledsWait) {
        for (const g of globs) wait.delete(g);
        if (wait.size === 0) {
          this.ledsWait.delete(cluster);
          this.warming.delete(`cluster:${cluster}`);
        }
      }
      return;
    }
    const objs = r.resources.map((x) => decode(r.type_url, x.resource!.value));
    const childNames = objs.map((o) => String(o[r.type_url === EDS ? 'cluster_name' : 'name']));
    this.childArrived(r.type_url, childNames, objs);
  }
}

/** The LEDS collections a CLA names (with the node's context parameters appended, as Envoy's subscription does). */
function ledsGlobs(cla: Obj, context: string): string[] {
  const out: string[] = [];
  for (const g of (cla['endpoints'] as Obj[] | undefined) ?? []) {
    const leds = g['leds_cluster_locality_config'] as Obj | undefined;
    if (leds?.['leds_collection_name']) out.push(`${String(leds['leds_collection_name'])}${context}`);
  }
  return [...new Set(out)];
}
