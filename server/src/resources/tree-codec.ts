/**
 * canopy.v1.LocalityTree (proto/canopy/v1/locality_tree.proto): a service's
 * compiled locality tree as node agents load it into BPF maps.
 *
 * Encoding is hand-assembled (about 10 bytes per backend) and done once per
 * service generation; every agent is sent the same bytes. Decoding, on the
 * agent side, goes through protobufjs with the .proto file, so the two ends
 * are checked against the schema rather than against each other.
 */
import ipaddr from 'ipaddr.js';
import protobuf from 'protobufjs';
import { isLoadAware } from '../domain/load/load-aware-spec.js';
import type { CompiledTree } from '../domain/locality-tree.js';
import { KERNEL_HOSTNAMES, kernelUnsupported } from '../domain/policy.js';
import type { LbMode, ServiceSpec } from '../domain/service.js';
import { serviceVips } from '../domain/vips.js';
import { packagePath } from '../platform/paths.js';
import { fieldSize, utf8Bytes, varintFieldSize, varintSize, WireWriter } from '../wire/wire.js';
import type { TreeSpill } from './tree-spill.js';
import { CodedError } from '../domain/errors.js';

export const TREE_MODES: Readonly<Record<LbMode, number>> = { random: 0, failover: 1, strict: 2 };
const MODE_NAMES: readonly LbMode[] = ['random', 'failover', 'strict'];

/** The tree as the agent sees it after decoding. */
export interface TreeMessage {
  readonly service: string;
  /** host-order IPv4, (a << 24) | (b << 16) | (c << 8) | d; 0 in an IPv6 tree */
  readonly vip: number;
  /** An IPv6 service: its VIP (16 bytes, network order); its backends carry `ipv6` instead of `ipv4`. */
  readonly vip6?: Uint8Array;
  readonly port: number;
  readonly mode: LbMode;
  /** Failover with the network as first level and cross-network failover (the CLA's network-first ranking). */
  readonly networkFirst: boolean;
  readonly scopes: readonly string[];
  readonly nodes: readonly {
    readonly parent: number;
    readonly value: string;
    readonly start: number;
    readonly end: number;
  }[];
  readonly backends: readonly {
    readonly ipv4: number;
    readonly ipv6?: Uint8Array;
    readonly port: number;
    readonly weight: number;
  }[];
  /** Policy features the tree does not express (field 8); absent or empty when it is the whole policy. */
  readonly unsupportedPolicy?: readonly string[];
  /** Load-aware balancing: connects are counted per target locality and reported (field 11). */
  readonly loadAware?: boolean;
  /** Per client node, the leaves its connects go to and their weights (field 12); by node, ascending. */
  readonly spills?: readonly TreeSpill[];
}

/** Parses dotted IPv4 to a host-order uint32; undefined for anything else. */
export function ipv4ToInt(address: string): number | undefined {
  const parts = address.split('.');
  if (parts.length !== 4) return undefined;
  let n = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p)) return undefined;
    const v = Number(p);
    if (v > 255) return undefined;
    n = n * 256 + v;
  }
  return n >>> 0;
}

export function intToIpv4(n: number): string {
  return `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
}

/** 16 bytes of an IPv6 address (not an IPv4-mapped one: that is IPv4), or undefined. */
export function ipv6Bytes(address: string): Uint8Array | undefined {
  if (!ipaddr.IPv6.isValid(address)) return undefined;
  const a = ipaddr.IPv6.parse(address);
  return a.isIPv4MappedAddress() ? undefined : Uint8Array.from(a.toByteArray());
}

export function ipv6String(bytes: Uint8Array): string {
  return ipaddr.fromByteArray([...bytes]).toString();
}

/** The VIPs the kernel datapath intercepts (IPv4 or IPv6 literals), primary first; none without a port. */
export function kernelVips(spec: ServiceSpec): readonly string[] {
  const ok = (v: string) => ipv4ToInt(v) !== undefined || ipv6Bytes(v) !== undefined;
  return spec.port === undefined ? [] : serviceVips(spec).filter(ok);
}

/** Can the kernel datapath serve this service? It needs an IPv4 or IPv6 VIP and a port. */
export const kernelServable = (spec: ServiceSpec): boolean => kernelVips(spec).length > 0;

function backendBodySize(ip: number | Uint8Array, port: number, weight: number): number {
  return (typeof ip === 'number' ? 5 : 18) + varintFieldSize(2, port) + (weight > 1 ? varintFieldSize(3, weight) : 0);
}

/**
 * Encodes one service's tree over one VIP (`address`, default `vip`; a dual-stack
 * service has a tree per VIP). connect4 sees IPv4 destinations, connect6 IPv6
 * ones: backends of the other family are left out and every node's range is
 * renumbered around them; a node left with no backends stays, with an empty
 * range, and the kernel treats it as unmatched.
 */
export function encodeLocalityTree(
  spec: ServiceSpec,
  tree: CompiledTree,
  spills: readonly TreeSpill[] = [],
  address: string | undefined = spec.vip,
): Uint8Array {
  const vip = address !== undefined ? ipv4ToInt(address) : undefined;
  const vip6 = address !== undefined && vip === undefined ? ipv6Bytes(address) : undefined;
  if ((vip === undefined && vip6 === undefined) || spec.port === undefined) {
    throw new CodedError(
      'CANOPY_INVALID_TREE',
      `service ${spec.name}: the kernel datapath needs an IPv4 or IPv6 vip and a port`,
    );
  }
  const n = tree.endpoints.length;
  const { before, ips } = backendsOfFamily(tree, vip6 !== undefined);
  const name = utf8Bytes(spec.name);
  const scopes = tree.scopes.map((s) => utf8Bytes(s));
  const nodeBodies = nodeBodiesOf(tree, before);

  const mode = TREE_MODES[spec.loadBalancing.mode];
  const unsupported = kernelUnsupported(spec.loadBalancing.policy, tree).map((f) => utf8Bytes(f));
  const lb = spec.loadBalancing;
  const networkFirst =
    lb.mode === 'failover' && lb.crossNetworkFailover && tree.scopes[0] === 'network' && tree.scopes.length > 1;
  const loadAware = isLoadAware(lb.loadAware);
  const spillBodies = loadAware ? spills.map(spillBody) : [];
  let size =
    (loadAware ? 2 : 0) +
    fieldSize(1, name.length) +
    (vip6 ? fieldSize(10, 16) : 5) +
    varintFieldSize(3, spec.port) +
    (mode ? varintFieldSize(4, mode) : 0) +
    (networkFirst ? 2 : 0);
  for (const f of unsupported) size += fieldSize(9, f.length);
  for (const b of spillBodies) size += fieldSize(12, b.size);
  for (const s of scopes) size += fieldSize(5, s.length);
  for (const b of nodeBodies) size += fieldSize(6, b.size);
  for (let i = 0; i < n; i++) {
    const ip = ips[i];
    if (ip === undefined) continue;
    const ep = tree.endpoints[i]!;
    size += fieldSize(7, backendBodySize(ip, ep.port, ep.weight));
  }

  const w = new WireWriter(size);
  w.bytes(1, name);
  if (vip !== undefined) w.fixed32(2, vip);
  w.uint(3, spec.port);
  if (mode) w.uint(4, mode);
  for (const s of scopes) w.bytes(5, s);
  for (const b of nodeBodies) {
    w.open(6, b.size);
    if (b.parent) w.uint(1, b.parent);
    if (b.value.length) w.bytes(2, b.value);
    if (b.start) w.uint(3, b.start);
    if (b.end) w.uint(4, b.end);
  }
  for (let i = 0; i < n; i++) {
    const ip = ips[i];
    if (ip === undefined) continue;
    const ep = tree.endpoints[i]!;
    w.open(7, backendBodySize(ip, ep.port, ep.weight));
    if (typeof ip === 'number') w.fixed32(1, ip);
    w.uint(2, ep.port);
    if (ep.weight > 1) w.uint(3, ep.weight);
    if (typeof ip !== 'number') w.bytes(4, ip);
  }
  if (networkFirst) w.uint(8, 1);
  for (const f of unsupported) w.bytes(9, f);
  if (vip6) w.bytes(10, vip6);
  if (loadAware) w.uint(11, 1);
  for (const b of spillBodies) {
    w.open(12, b.size);
    if (b.node) w.uint(1, b.node);
    packed(w, 2, b.leaves, b.leavesSize);
    packed(w, 3, b.weights, b.weightsSize);
  }
  return w.finish();
}

/** The backends of the VIP's family: each endpoint's address (undefined if of the other family), and
 * before[i] = backends of the family among endpoints[0, i) (the nodes' ranges renumbered around the rest). */
function backendsOfFamily(tree: CompiledTree, v6: boolean) {
  const n = tree.endpoints.length;
  const before = new Uint32Array(n + 1);
  const ips = new Array<number | Uint8Array | undefined>(n);
  for (let i = 0; i < n; i++) {
    const address = tree.endpoints[i]!.address;
    const ip = v6 ? ipv6Bytes(address) : ipv4ToInt(address);
    ips[i] = ip;
    before[i + 1] = before[i]! + (ip === undefined ? 0 : 1);
  }
  return { before, ips };
}

/** Each tree node's message body: its parent, value and renumbered range, with its encoded size. */
function nodeBodiesOf(tree: CompiledTree, before: Uint32Array) {
  return tree.nodes.map((node) => {
    const value = utf8Bytes(node.value);
    const parent = Math.max(0, node.parent);
    const start = before[node.start]!;
    const end = before[node.end]!;
    const size =
      (parent ? varintFieldSize(1, parent) : 0) +
      (value.length ? fieldSize(2, value.length) : 0) +
      (start ? varintFieldSize(3, start) : 0) +
      (end ? varintFieldSize(4, end) : 0);
    return { value, parent, start, end, size };
  });
}

function spillBody(s: TreeSpill): TreeSpill & { size: number; leavesSize: number; weightsSize: number } {
  const leavesSize = s.leaves.reduce((t, v) => t + varintSize(v), 0);
  const weightsSize = s.weights.reduce((t, v) => t + varintSize(v), 0);
  const size =
    (s.node ? varintFieldSize(1, s.node) : 0) +
    (leavesSize ? fieldSize(2, leavesSize) : 0) +
    (weightsSize ? fieldSize(3, weightsSize) : 0);
  return { ...s, size, leavesSize, weightsSize };
}

/** A packed repeated uint32 field (proto3's default encoding). */
function packed(w: WireWriter, field: number, values: readonly number[], bodySize: number): void {
  if (!bodySize) return;
  w.open(field, bodySize);
  for (const v of values) w.varint(v);
}

let treeType: protobuf.Type | undefined;

function localityTreeType(): protobuf.Type {
  treeType ??= protobuf
    .loadSync(packagePath('proto', 'canopy', 'v1', 'locality_tree.proto'))
    .lookupType('canopy.v1.LocalityTree');
  return treeType;
}

interface RawTree {
  service?: string;
  vip?: number;
  port?: number;
  mode?: number;
  scopes?: string[];
  nodes?: { parent?: number; value?: string; start?: number; end?: number }[];
  backends?: { ipv4?: number; ipv6?: Uint8Array; port?: number; weight?: number }[];
  networkFirst?: boolean;
  unsupportedPolicy?: string[];
  vip6?: Uint8Array;
  loadAware?: boolean;
  spills?: { node?: number; leaves?: number[]; weights?: number[] }[];
}

export type DecodedTree =
  | { readonly ok: true; readonly tree: TreeMessage }
  | { readonly ok: false; readonly service: string; readonly error: string };

/** Decodes (and checks the shape of) a tree; throws with the field at fault. */
export function decodeLocalityTree(bytes: Uint8Array): TreeMessage {
  const r = tryDecodeLocalityTree(bytes);
  if (!r.ok) throw new CodedError('CANOPY_INVALID_TREE', r.error);
  return r.tree;
}

/** decodeLocalityTree as data: an error names the field at fault and, if it can be read, the service. */
export function tryDecodeLocalityTree(bytes: Uint8Array): DecodedTree {
  let raw: RawTree;
  try {
    raw = localityTreeType().toObject(localityTreeType().decode(bytes), { defaults: true }) as RawTree;
  } catch (err) {
    return { ok: false, service: '', error: `LocalityTree: ${(err as Error).message}` };
  }
  try {
    return { ok: true, tree: checkTree(raw) };
  } catch (err) {
    return { ok: false, service: raw.service ?? '', error: (err as Error).message };
  }
}

function checkTree(raw: RawTree): TreeMessage {
  const service = raw.service ?? '';
  const where = (f: string) => `LocalityTree ${service || '(unnamed)'}: ${f}`;
  if (!service) throw new CodedError('CANOPY_INVALID_TREE', where('service is empty'));
  const mode = MODE_NAMES[raw.mode ?? 0];
  if (!mode) throw new CodedError('CANOPY_INVALID_TREE', where(`mode ${raw.mode} is not RANDOM, FAILOVER or STRICT`));
  const v6 = raw.vip6 !== undefined && raw.vip6.length > 0;
  if (v6 && (raw.vip6!.length !== 16 || raw.vip6!.every((x) => x === 0)))
    throw new CodedError('CANOPY_INVALID_TREE', where('vip6 is not a 16-byte IPv6 address other than ::'));
  const backends = (raw.backends ?? []).map((b) =>
    v6
      ? { ipv4: 0, ipv6: Uint8Array.from(b.ipv6 ?? []), port: b.port ?? 0, weight: b.weight || 1 }
      : { ipv4: (b.ipv4 ?? 0) >>> 0, port: b.port ?? 0, weight: b.weight || 1 },
  );
  backends.forEach((b, i) => {
    if (b.port < 1 || b.port > 65535)
      throw new CodedError('CANOPY_INVALID_TREE', where(`backends[${i}].port ${b.port} is not 1..65535`));
    if (v6) {
      if (b.ipv6!.length !== 16 || b.ipv6!.every((x) => x === 0))
        throw new CodedError(
          'CANOPY_INVALID_TREE',
          where(`backends[${i}].ipv6 is not a 16-byte IPv6 address other than ::`),
        );
    } else if (b.ipv4 === 0) throw new CodedError('CANOPY_INVALID_TREE', where(`backends[${i}].ipv4 is 0.0.0.0`));
  });
  const nodes = (raw.nodes ?? []).map((n) => ({
    parent: n.parent ?? 0,
    value: n.value ?? '',
    start: n.start ?? 0,
    end: n.end ?? 0,
  }));
  const scopes = raw.scopes ?? [];
  if (nodes.length === 0) throw new CodedError('CANOPY_INVALID_TREE', where('nodes is empty (the root is required)'));
  const depth = new Array<number>(nodes.length).fill(0);
  nodes.forEach((n, i) => {
    if (n.start > n.end || n.end > backends.length) {
      throw new CodedError(
        'CANOPY_INVALID_TREE',
        where(`nodes[${i}] range [${n.start}, ${n.end}) is outside backends[0, ${backends.length})`),
      );
    }
    if (i === 0) {
      if (n.start !== 0 || n.end !== backends.length)
        throw new CodedError('CANOPY_INVALID_TREE', where('nodes[0] (the root) must cover every backend'));
      return;
    }
    if (n.parent >= i)
      throw new CodedError('CANOPY_INVALID_TREE', where(`nodes[${i}].parent ${n.parent} does not come before it`));
    const p = nodes[n.parent]!;
    if (n.start < p.start || n.end > p.end)
      throw new CodedError('CANOPY_INVALID_TREE', where(`nodes[${i}] range is outside its parent's`));
    depth[i] = depth[n.parent]! + 1;
    if (depth[i]! > scopes.length)
      throw new CodedError('CANOPY_INVALID_TREE', where(`nodes[${i}] is deeper than the ${scopes.length} scopes`));
  });
  const unsupportedPolicy = raw.unsupportedPolicy ?? [];
  if (unsupportedPolicy.includes(KERNEL_HOSTNAMES))
    throw new CodedError(
      'CANOPY_INVALID_TREE',
      where(
        'refused: hostname endpoints; the kernel datapath connects to addresses and resolves no names (sidecars and proxyless clients resolve them)',
      ),
    );
  const spills = checkSpills(raw.spills ?? [], nodes.length, depth, scopes.length, where);
  return {
    service,
    vip: (raw.vip ?? 0) >>> 0,
    ...(v6 ? { vip6: Uint8Array.from(raw.vip6!) } : {}),
    port: raw.port ?? 0,
    mode,
    networkFirst: raw.networkFirst === true,
    scopes,
    nodes,
    backends,
    ...(unsupportedPolicy.length ? { unsupportedPolicy } : {}),
    ...(raw.loadAware ? { loadAware: true } : {}),
    ...(spills.length ? { spills } : {}),
  };
}

/** Each spill names a node once, leaves (depth = scopes) and one positive weight per leaf. */
function checkSpills(
  raw: NonNullable<RawTree['spills']>,
  nodes: number,
  depth: readonly number[],
  levels: number,
  where: (f: string) => string,
): TreeSpill[] {
  const seen = new Set<number>();
  return raw.map((s, i) => {
    const node = s.node ?? 0;
    const leaves = s.leaves ?? [];
    const weights = s.weights ?? [];
    if (node >= nodes) throw new CodedError('CANOPY_INVALID_TREE', where(`spills[${i}].node ${node} is not a node`));
    if (seen.has(node))
      throw new CodedError('CANOPY_INVALID_TREE', where(`spills[${i}].node ${node} has another spill before it`));
    seen.add(node);
    if (leaves.length !== weights.length)
      throw new CodedError(
        'CANOPY_INVALID_TREE',
        where(`spills[${i}] has ${leaves.length} leaves and ${weights.length} weights`),
      );
    leaves.forEach((l, j) => {
      if (l >= nodes || depth[l] !== levels)
        throw new CodedError('CANOPY_INVALID_TREE', where(`spills[${i}].leaves[${j}] ${l} is not a leaf`));
      if (!(weights[j]! > 0)) throw new CodedError('CANOPY_INVALID_TREE', where(`spills[${i}].weights[${j}] is 0`));
    });
    return { node, leaves: [...leaves], weights: [...weights] };
  });
}

/** Bytes per backend on the wire for a given address/port mix, for the docs and the bench. */
export function backendWireSize(port: number, weight = 1): number {
  const body = backendBodySize(0, port, weight);
  return 1 + varintSize(body) + body;
}
