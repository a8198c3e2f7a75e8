/**
 * xDS collections on a delta stream (LEDS): a client subscribes to a glob
 * (`xdstp://…/path/*`) and holds the collection's members. Per stream and glob
 * only the snapshot the client holds is kept (one reference, never one entry
 * per member); a change is the diff of two snapshots, computed once per
 * (old, new) pair and shared by every stream that makes the same step, and
 * its SharedResponses key names the step (`glob@old>new`), not the members.
 * A reconnect's `initial_resource_versions` for members is diffed per stream.
 *
 * A glob may carry xdstp context parameters (`…/*?k=v`, which Envoy appends
 * from its bootstrap's `node_context_params`): the collection is the glob
 * without them, and its members are named with the same parameters, since
 * Envoy's WatchMap::watchesInterestedIn matches a member to a glob by the
 * whole URN, context parameters included.
 */
import type { CollectionSnapshot, Collections } from '../resources/resource-type.js';
import { versionText } from '../resources/resource.js';
import type { DeltaResource } from '../wire/envelope.js';
import type { ResourceState } from './client-status.js';

/** What one response carries for one glob. */
export interface GlobStep {
  readonly glob: string;
  /** The snapshot the step brings the client to. */
  readonly now: CollectionSnapshot | undefined;
  readonly resources: readonly DeltaResource[];
  readonly removed: readonly string[];
  /** Compact: names the step, for the shared-responses key; undefined for a per-stream (unshared) step. */
  readonly key: string | undefined;
}

const NOTHING: GlobStep = { glob: '', now: undefined, resources: [], removed: [], key: '' };

/** An xdstp name split into the name without its context parameters and those (`?…`, or ''). */
export function splitContext(name: string): { readonly base: string; readonly context: string } {
  const q = name.startsWith('xdstp://') ? name.indexOf('?') : -1;
  return q < 0 ? { base: name, context: '' } : { base: name.slice(0, q), context: name.slice(q) };
}

/** Whether a name is a glob of this type, context parameters or not. */
export function isGlob(collections: Collections, name: string): boolean {
  return collections.isCollection(splitContext(name).base);
}

/** The same step for a glob with context parameters: every member and removal named with them. */
function inContext(step: GlobStep, glob: string, context: string): GlobStep {
  if (context === '') return step;
  return {
    glob,
    now: step.now,
    resources: step.resources.map((r) => ({ ...r, name: `${r.name}${context}` })),
    removed: step.removed.map((n) => `${n}${context}`),
    key: step.key === undefined ? undefined : `${step.key}${context}`,
  };
}

/** The globs one stream holds, for one type. */
export class HeldGlobs {
  /** glob → the snapshot the client holds (undefined once sent as empty). */
  readonly held = new Map<string, CollectionSnapshot | undefined>();
  readonly acked = new Map<string, CollectionSnapshot | undefined>();
  nacked = new Set<string>();
  /** glob → the snapshot version the client refused when sent on its own: not sent again until it changes. */
  private refused?: Map<string, string>;
  /** glob → member → version, from a reconnect's initial_resource_versions, until first answered. */
  private readonly initial = new Map<string, Map<string, string>>();
  /** Globs subscribed to. */
  readonly names = new Set<string>();
  /** Subscribed and not answered yet. */
  readonly fresh = new Set<string>();
  /** To be sent whole again (the client lost its copy, or a new cluster watches it): glob → true. */
  private readonly again = new Set<string>();
  /** Globs subscribed with context parameters, by the glob without them (what collectionChanges names). */
  readonly withContext = new Map<string, Set<string>>();
  /** The type's collection epoch this stream has looked at every change up to. */
  synced = -1;

  subscribe(glob: string): void {
    this.names.add(glob);
    this.fresh.add(glob);
    const { base, context } = splitContext(glob);
    if (context === '') return;
    let s = this.withContext.get(base);
    if (!s) this.withContext.set(base, (s = new Set()));
    s.add(glob);
  }

  /** Sends every member of a subscribed glob again with the next response; false when not subscribed. */
  resend(glob: string): boolean {
    if (!this.names.has(glob)) return false;
    this.again.add(glob);
    this.fresh.add(glob);
    return true;
  }

  /** Takes what the client said it holds of members of subscribed globs out of `held` (a name → version map). */
  adopt(heldNames: Map<string, string>, subscribed: ReadonlySet<string>): void {
    for (const [name, version] of heldNames) {
      const { base, context } = splitContext(name);
      const bare = globOf(base);
      const glob = bare === undefined ? undefined : `${bare}${context}`;
      if (!glob || !subscribed.has(glob)) continue;
      let m = this.initial.get(glob);
      if (!m) this.initial.set(glob, (m = new Map()));
      m.set(name, version);
      heldNames.delete(name);
    }
  }

  /** The step that brings the client's copy of `glob` to `now`; undefined when it is up to date. */
  step(glob: string, now: CollectionSnapshot | undefined): GlobStep | undefined {
    const initial = this.initial.get(glob);
    const { base, context } = splitContext(glob);
    const old = this.held.get(glob);
    const step = initial
      ? resume(glob, initial, now, context)
      : this.again.has(glob)
        ? wholeStep(base, old, now)
        : diffStep(base, old, now);
    this.initial.delete(glob);
    this.again.delete(glob);
    this.refused?.delete(glob);
    this.held.set(glob, now);
    return step === NOTHING ? undefined : inContext(step, glob, context);
  }

  forget(glob: string): void {
    this.names.delete(glob);
    this.fresh.delete(glob);
    this.again.delete(glob);
    const { base, context } = splitContext(glob);
    if (context !== '') {
      const s = this.withContext.get(base);
      s?.delete(glob);
      if (s?.size === 0) this.withContext.delete(base);
    }
    this.held.delete(glob);
    this.acked.delete(glob);
    this.nacked.delete(glob);
    this.refused?.delete(glob);
    this.initial.delete(glob);
  }

  /**
   * A NACK of the step that brought `glob` to `sent`: the client holds what it last acknowledged (or
   * nothing), so the next step starts from there. Unless a newer step has been sent since.
   */
  rollBack(glob: string, sent: CollectionSnapshot | undefined): void {
    this.nacked.add(glob);
    if (!this.names.has(glob) || this.held.get(glob) !== sent) return;
    if (this.acked.has(glob)) this.held.set(glob, this.acked.get(glob));
    else this.held.delete(glob);
    this.fresh.add(glob);
  }

  /** The client refused `glob` at `now`, sent on its own: not sent again until it changes. */
  refuse(glob: string, now: CollectionSnapshot | undefined): void {
    (this.refused ??= new Map()).set(glob, now?.version ?? '');
  }

  /** Whether `now` is what the client refused of `glob` (sent on its own and NACKed). */
  isRefused(glob: string, now: CollectionSnapshot | undefined): boolean {
    const r = this.refused?.get(glob);
    return r !== undefined && r === (now?.version ?? '');
  }

  /** CSDS: one entry per subscribed glob, versioned by its snapshot. */
  status(glob: string): { version: string; state: ResourceState } | undefined {
    if (!this.held.has(glob)) return this.nacked.has(glob) ? { version: '', state: 'NACKED' } : undefined;
    const snap = this.held.get(glob);
    const state: ResourceState = this.nacked.has(glob)
      ? 'NACKED'
      : !snap
        ? 'DOES_NOT_EXIST'
        : this.acked.get(glob) === snap
          ? 'ACKED'
          : 'REQUESTED';
    return { version: snap?.version ?? '', state };
  }
}

/**
 * The collections part of one response: the step taken for each glob that
 * changed. The members themselves are gathered only when the response is
 * encoded (`resources`, `removed`): a stream whose bytes are already shared
 * never copies them.
 */
export class GlobResponse {
  /** The steps taken, in glob name order: what an ACK of this response settles. */
  readonly steps: GlobStep[] = [];
  /** Members carried (not counting removals). */
  count = 0;
  private shareable = true;

  constructor(
    private readonly type: Collections,
    private readonly held: HeldGlobs,
  ) {}

  is(name: string): boolean {
    return isGlob(this.type, name);
  }

  /** The type's collection epoch this response brings the stream to (for system_version_info). */
  epoch = 0;

  /**
   * Brings every subscribed glob up to date, looking only at those changed
   * since the stream last looked (and those just subscribed to).
   */
  collect(only?: ReadonlySet<string>): void {
    const held = this.held;
    const changes = this.type.collectionChanges(held.synced);
    let candidates: string[];
    if (changes?.globs === undefined) candidates = [...held.names];
    else {
      const seen = new Set(held.fresh);
      for (const g of changes.globs) {
        if (held.names.has(g)) seen.add(g);
        for (const c of held.withContext.get(g) ?? []) seen.add(c);
      }
      candidates = [...seen];
    }
    held.fresh.clear();
    if (changes) held.synced = this.epoch = changes.epoch;
    if (only) {
      // A retry after a NACK sends one group: the other globs' changes wait for the next response.
      for (const g of candidates) if (!only.has(g)) held.fresh.add(g);
      candidates = candidates.filter((g) => only.has(g));
    }
    // In name order: streams that take the same steps get the same bytes whatever order they subscribed in.
    for (const g of candidates.sort()) this.take(g);
  }

  private take(glob: string): void {
    const now = this.type.collection(splitContext(glob).base);
    if (this.held.isRefused(glob, now)) return;
    const step = this.held.step(glob, now);
    if (!step) return;
    this.steps.push(step);
    this.count += step.resources.length;
    if (step.key === undefined) this.shareable = false;
  }

  /** The members carried, in step order. */
  resources(): DeltaResource[] {
    const out: DeltaResource[] = [];
    for (const s of this.steps) for (const r of s.resources) out.push(r);
    return out;
  }

  /** The member names removed, in step order. */
  removed(): string[] {
    const out: string[] = [];
    for (const s of this.steps) for (const n of s.removed) out.push(n);
    return out;
  }

  /** The steps as a shared-responses key part; undefined when one of them is this stream's own. */
  key(): string | undefined {
    return this.shareable ? this.steps.map((s) => s.key).join('\n') : undefined;
  }
}

/**
 * Per stream: members whose version differs from what the client said it
 * holds, and those gone. `initial` names carry the glob's context parameters;
 * the step's names do not (inContext adds them).
 */
function resume(
  glob: string,
  initial: ReadonlyMap<string, string>,
  now: CollectionSnapshot | undefined,
  context: string,
): GlobStep {
  const resources: DeltaResource[] = [];
  const removed: string[] = [];
  for (const [name, r] of now?.members ?? []) {
    const version = versionText(r.hash);
    if (initial.get(`${name}${context}`) !== version) resources.push({ name, version, any: r.any });
  }
  for (const name of initial.keys()) {
    const bare = name.slice(0, name.length - context.length);
    if (!now?.members.has(bare)) removed.push(bare);
  }
  return resources.length || removed.length ? { glob, now, resources, removed, key: undefined } : NOTHING;
}

/** Every member of `now` (the client lost its copy, or a new watch needs them all), and those gone since `old`. */
function wholeStep(glob: string, old: CollectionSnapshot | undefined, now: CollectionSnapshot | undefined): GlobStep {
  const resources: DeltaResource[] = [];
  const removed: string[] = [];
  for (const [name, r] of now?.members ?? []) resources.push({ name, version: versionText(r.hash), any: r.any });
  if (old) for (const name of old.members.keys()) if (!now?.members.has(name)) removed.push(name);
  if (resources.length === 0 && removed.length === 0) return NOTHING;
  return { glob, now, resources, removed, key: `${glob}@${old?.id ?? 0}=>${now?.id ?? 0}` };
}

/** Steps from a snapshot (or nothing held) to another, shared by every stream making the same step. */
const fromNothing = new WeakMap<CollectionSnapshot, GlobStep>();
const steps = new WeakMap<CollectionSnapshot, Map<number, GlobStep>>();

export function diffStep(
  glob: string,
  old: CollectionSnapshot | undefined,
  now: CollectionSnapshot | undefined,
): GlobStep {
  if (old === now) return NOTHING;
  const nowId = now?.id ?? 0;
  let memo: Map<number, GlobStep> | undefined;
  if (old) {
    memo = steps.get(old);
    const hit = memo?.get(nowId);
    if (hit) return hit;
  } else if (now) {
    const hit = fromNothing.get(now);
    if (hit) return hit;
  }
  const resources: DeltaResource[] = [];
  const removed: string[] = [];
  for (const [name, r] of now?.members ?? []) {
    if (old?.members.get(name)?.hash === r.hash) continue;
    resources.push({ name, version: versionText(r.hash), any: r.any });
  }
  if (old) for (const name of old.members.keys()) if (!now?.members.has(name)) removed.push(name);
  const step: GlobStep =
    resources.length || removed.length
      ? { glob, now, resources, removed, key: `${glob}@${old?.id ?? 0}>${nowId}` }
      : NOTHING;
  if (old) {
    if (!memo) steps.set(old, (memo = new Map()));
    memo.set(nowId, step);
  } else if (now) fromNothing.set(now, step);
  return step;
}

/** The glob an xdstp member name belongs to: its last path segment replaced by `*` (Envoy's watch map rule). */
export function globOf(name: string): string | undefined {
  if (!name.startsWith('xdstp://') || name.endsWith('/*')) return undefined;
  const slash = name.lastIndexOf('/');
  return slash < 'xdstp://'.length ? undefined : `${name.slice(0, slash + 1)}*`;
}
