/**
 * The locality tree: a service's routable endpoints grouped by its ordered
 * scopes (region → zone → subzone by default). A client walks down with its
 * own path; the deepest node it reaches holds its best endpoints, that node's
 * parent the next best, and so on.
 *
 * Insert, remove and update cost O(depth) map operations. Endpoints live in
 * the leaves; iterating a subtree (children in sorted order) yields them in
 * depth-first order, and `compile()` lays that order out flat so that every
 * node's subtree is one contiguous range.
 */
import { scopeValue, type Placement, type Scope } from './locality.js';
import type { Endpoint } from './service.js';

export class TreeNode {
  readonly children = new Map<string, TreeNode>();
  /** Only leaves (depth === levels) hold endpoints, keyed by endpointKey. */
  readonly endpoints = new Map<string, Endpoint>();
  /** Number of endpoints in this subtree. */
  count = 0;
  private sortedChildren: TreeNode[] | undefined;
  private sortedEndpoints: Endpoint[] | undefined;
  private weight: number | undefined;
  private leafList: TreeNode[] | undefined;
  /** Bumped whenever anything in this subtree changes: caches of derived bytes compare it. */
  rev = 0;

  constructor(
    /** Unique for the tree's lifetime: a pruned and re-created node gets a new id. */
    readonly id: number,
    readonly value: string,
    readonly depth: number,
    readonly parent: TreeNode | undefined,
  ) {}

  /** Children ordered by value, so iteration order depends on content only. */
  orderedChildren(): readonly TreeNode[] {
    this.sortedChildren ??= inKeyOrder(this.children);
    return this.sortedChildren;
  }

  /** Endpoints ordered by endpointKey. */
  orderedEndpoints(): readonly Endpoint[] {
    this.sortedEndpoints ??= inKeyOrder(this.endpoints);
    return this.sortedEndpoints;
  }

  /** The leaves of this subtree, depth-first; kept until a node below is added or pruned. */
  leaves(levels: number): readonly TreeNode[] {
    if (!this.leafList) {
      if (this.depth === levels) this.leafList = [this];
      else {
        const out: TreeNode[] = [];
        for (const c of this.orderedChildren()) for (const l of c.leaves(levels)) out.push(l);
        this.leafList = out;
      }
    }
    return this.leafList;
  }

  /** Sum of this leaf's endpoint weights, kept until the leaf changes. */
  leafWeight(): number {
    if (this.weight === undefined) {
      let w = 0;
      for (const e of this.endpoints.values()) w += e.weight;
      this.weight = w;
    }
    return this.weight;
  }

  /** The values on the path from the root to this node. */
  path(): string[] {
    const out: string[] = this.parent ? [this.value] : [];
    for (let n = this.parent; n?.parent; n = n.parent) out.push(n.value);
    return out.reverse();
  }

  /** @internal */
  touchChildren(): void {
    this.sortedChildren = undefined;
    this.leafList = undefined;
    this.rev++;
    for (let n = this.parent; n; n = n.parent) {
      n.leafList = undefined;
      n.rev++;
    }
  }

  /** @internal */
  touchEndpoints(): void {
    this.sortedEndpoints = undefined;
    this.weight = undefined;
    this.rev++;
    for (let n = this.parent; n; n = n.parent) n.rev++;
  }
}

/**
 * A map's values ordered by key, as `<` orders strings (by UTF-16 code unit).
 * The default sort compares strings that way natively, with no comparator
 * call per comparison.
 */
function inKeyOrder<T>(m: ReadonlyMap<string, T>): T[] {
  const keys = [...m.keys()].sort();
  const out = new Array<T>(keys.length);
  for (let i = 0; i < keys.length; i++) out[i] = m.get(keys[i]!)!;
  return out;
}

/** The flat form shipped to node agents: O(nodes + endpoints). */
export interface CompiledTree {
  readonly scopes: readonly Scope[];
  /** Node i: its parent index (-1 for the root), depth, value, and [start, end) into `endpoints`. */
  readonly nodes: readonly CompiledNode[];
  /** Endpoints in depth-first order. */
  readonly endpoints: readonly Endpoint[];
}

export interface CompiledNode {
  readonly parent: number;
  readonly depth: number;
  readonly value: string;
  readonly start: number;
  readonly end: number;
}

export class LocalityTree {
  readonly root: TreeNode;
  private nextId = 1;
  private nodes = 1;
  private shapeVersion = 0;

  constructor(readonly scopes: readonly Scope[]) {
    if (scopes.length < 1 || scopes.length > 8) throw new RangeError('a locality tree has 1 to 8 levels');
    this.root = new TreeNode(0, '', 0, undefined);
  }

  get levels(): number {
    return this.scopes.length;
  }

  get size(): number {
    return this.root.count;
  }

  get nodeCount(): number {
    return this.nodes;
  }

  /**
   * Bumped whenever a node is added or pruned. Which tree nodes a client's
   * tiers consist of depends only on the shape, so a plan (and a CLA that
   * follows its nodes' content) outlives every change that keeps it.
   */
  get shape(): number {
    return this.shapeVersion;
  }

  /** The endpoint held under `key` at `placement`'s leaf (the placement of the endpoint as last inserted). */
  get(key: string, placement: Placement): Endpoint | undefined {
    return this.leafAt(placement)?.endpoints.get(key);
  }

  has(key: string, placement: Placement): boolean {
    return this.leafAt(placement)?.endpoints.has(key) ?? false;
  }

  /**
   * Inserts or replaces one endpoint. O(depth). `previous` is the endpoint
   * this key was last inserted as, if it may be in the tree: the tree keeps
   * no index of keys (a 100k-endpoint service paid ~50 ms and a 100k-entry
   * map for one at every start), so a key is found by its placement.
   */
  upsert(endpoint: Endpoint, key: string, previous: Endpoint | undefined): void {
    if (previous) {
      const current = this.leafAt(previous);
      if (current?.endpoints.has(key)) {
        if (this.samePlace(previous, endpoint)) {
          current.endpoints.set(key, endpoint);
          current.touchEndpoints();
          return;
        }
        this.removeFrom(current, key);
      }
    }
    let node = this.root;
    for (const scope of this.scopes) {
      const value = scopeValue(scope, endpoint);
      let child = node.children.get(value);
      if (!child) {
        child = new TreeNode(this.nextId++, value, node.depth + 1, node);
        node.children.set(value, child);
        node.touchChildren();
        this.nodes++;
        this.shapeVersion++;
      }
      node.count++;
      node = child;
    }
    node.count++;
    node.endpoints.set(key, endpoint);
    node.touchEndpoints();
  }

  /** Removes the endpoint held under `key` as `previous` placed it, and prunes branches left empty. O(depth). */
  remove(key: string, previous: Placement): boolean {
    const leaf = this.leafAt(previous);
    if (!leaf?.endpoints.has(key)) return false;
    this.removeFrom(leaf, key);
    return true;
  }

  private removeFrom(leaf: TreeNode, key: string): void {
    leaf.endpoints.delete(key);
    leaf.touchEndpoints();
    for (let n: TreeNode | undefined = leaf; n; n = n.parent) {
      n.count--;
      if (n.count === 0 && n.parent) {
        n.parent.children.delete(n.value);
        n.parent.touchChildren();
        this.nodes--;
        this.shapeVersion++;
      }
    }
  }

  /** The leaf `p` belongs in, if the tree has it. */
  private leafAt(p: Placement): TreeNode | undefined {
    let node = this.root;
    for (const scope of this.scopes) {
      const child = node.children.get(scopeValue(scope, p));
      if (!child) return undefined;
      node = child;
    }
    return node;
  }

  private samePlace(a: Placement, b: Placement): boolean {
    for (const scope of this.scopes) if (scopeValue(scope, a) !== scopeValue(scope, b)) return false;
    return true;
  }

  /** The deepest node on `path` (the root when even the first level differs). */
  match(path: readonly string[]): TreeNode {
    let node = this.root;
    for (const value of path) {
      const child = node.children.get(value);
      if (!child) break;
      node = child;
    }
    return node;
  }

  /** `match(pathOf(scopes, p))` without building the path. */
  matchPlacement(p: Placement): TreeNode {
    let node = this.root;
    for (const scope of this.scopes) {
      const child = node.children.get(scopeValue(scope, p));
      if (!child) break;
      node = child;
    }
    return node;
  }

  /** Endpoints of a subtree in depth-first order. */
  *endpointsOf(node: TreeNode): Generator<Endpoint> {
    if (node.depth === this.levels) {
      yield* node.orderedEndpoints();
      return;
    }
    for (const child of node.orderedChildren()) yield* this.endpointsOf(child);
  }

  /** Every node, pre-order (parents before children, siblings by value). */
  *nodesOf(node: TreeNode = this.root): Generator<TreeNode> {
    yield node;
    for (const child of node.orderedChildren()) yield* this.nodesOf(child);
  }

  compile(): CompiledTree {
    const nodes: CompiledNode[] = [];
    const endpoints: Endpoint[] = [];
    const visit = (node: TreeNode, parent: number): void => {
      const index = nodes.length;
      const start = endpoints.length;
      nodes.push({ parent, depth: node.depth, value: node.value, start, end: start + node.count });
      if (node.depth === this.levels) endpoints.push(...node.orderedEndpoints());
      else for (const child of node.orderedChildren()) visit(child, index);
    };
    visit(this.root, -1);
    return { scopes: this.scopes, nodes, endpoints };
  }
}
