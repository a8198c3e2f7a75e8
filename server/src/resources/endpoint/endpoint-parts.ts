/**
 * The parts a ClusterLoadAssignment is assembled from, each encoded once and
 * cached by object identity: an endpoint's `lb_endpoints` field (per Endpoint
 * object), a tree leaf's group body (per leaf endpoint array), a locality's
 * names, the policy field. The caches die with their keys.
 */
import type { ClaGroup } from '../../domain/cla.js';
import type { Locality } from '../../domain/locality.js';
import type { Endpoint } from '../../domain/service.js';
import { fieldSize, optionalFieldSize, utf8Bytes, varintFieldSize, WireWriter } from '../../wire/wire.js';

const lbEndpointCache = new WeakMap<Endpoint, Uint8Array>();
let lbEndpointEncodings = 0;

/** How many LbEndpoints were encoded so far (tests check that unchanged ones are reused). */
export function lbEndpointEncodeCount(): number {
  return lbEndpointEncodings;
}

/** The whole `lb_endpoints` field (tag, length, LbEndpoint) of one endpoint, cached per Endpoint object. */
function lbEndpointField(ep: Endpoint): Uint8Array {
  const hit = lbEndpointCache.get(ep);
  if (hit) return hit;
  lbEndpointEncodings++;
  const addr = utf8Bytes(ep.address);
  const w = new WireWriter(lbEndpointSize(ep, addr.length));
  lbEndpointHead(w, ep, addr.length).bytes(2, addr);
  const out = lbEndpointTail(w, ep).finish();
  lbEndpointCache.set(ep, out);
  return out;
}

/** Size of an endpoint's `lb_endpoints` field whose address is `addressBytes` long in UTF-8. */
function lbEndpointSize(ep: Endpoint, addressBytes: number): number {
  const socket = fieldSize(2, addressBytes) + varintFieldSize(3, ep.port);
  const weight = ep.weight === 1 ? 0 : fieldSize(4, varintFieldSize(1, ep.weight));
  return fieldSize(2, fieldSize(1, fieldSize(1, fieldSize(1, socket))) + weight);
}

/** An `lb_endpoints` field up to its address string: LbEndpoint, Endpoint, Address, SocketAddress. */
function lbEndpointHead(w: WireWriter, ep: Endpoint, addressBytes: number): WireWriter {
  const socket = fieldSize(2, addressBytes) + varintFieldSize(3, ep.port);
  const address = fieldSize(1, socket);
  const endpoint = fieldSize(1, address);
  const weight = ep.weight === 1 ? 0 : fieldSize(4, varintFieldSize(1, ep.weight));
  return w
    .open(2, fieldSize(1, endpoint) + weight)
    .open(1, endpoint)
    .open(1, address)
    .open(1, socket);
}

/** The rest of an `lb_endpoints` field after its address string: the port, and a weight other than 1. */
function lbEndpointTail(w: WireWriter, ep: Endpoint): WireWriter {
  w.uint(3, ep.port);
  if (ep.weight !== 1) w.open(4, varintFieldSize(1, ep.weight)).uint(1, ep.weight);
  return w;
}

/** A string's length when every character is ASCII (one UTF-8 byte each), else -1. */
function asciiLength(s: string): number {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return -1;
  return s.length;
}

const runCache = new WeakMap<readonly Endpoint[], Uint8Array>();

/** The lb_endpoints fields of one tree leaf, concatenated once per version of that leaf. */
function runField(run: readonly Endpoint[]): Uint8Array {
  const hit = runCache.get(run);
  if (hit) return hit;
  const parts = run.map(lbEndpointField);
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  runCache.set(run, out);
  return out;
}

export interface GroupBody {
  /** LocalityLbEndpoints less its priority: locality, lb_endpoints, load_balancing_weight. */
  readonly bytes: Uint8Array;
  readonly weight: number;
  /** fastDigest of `bytes`, computed on first use by a rope. */
  digest: number | undefined;
}

const UINT32_MAX = 0xffff_ffff;
let clampedWeights = 0;

/** How many locality weights were over uint32 and sent as its maximum (a decoder would wrap them). */
export function clampedWeightCount(): number {
  return clampedWeights;
}

/**
 * load_balancing_weight is a uint32: a bigger sum would be truncated by every
 * decoder (4,295 endpoints of weight 1,000,000 would arrive as 32,704). Config
 * validation keeps a service's total within uint32; this is the last guard,
 * for a sum reached another way (endpoint PATCHes): clamp, never wrap.
 */
export function localityWeight(sum: number): number {
  if (sum <= UINT32_MAX) return sum;
  clampedWeights++;
  return UINT32_MAX;
}

/** A one-leaf group's body, encoded once per version of that leaf (keyed by its endpoint array). */
const leafBodyCache = new WeakMap<readonly Endpoint[], GroupBody>();

export function groupBody(g: ClaGroup): Uint8Array {
  const single = g.runs?.length === 1 ? g.runs[0] : undefined;
  if (single) return runBody(single, g.locality, g.weight).bytes;
  const endpoints = g.runs ? g.runs.map(runField) : g.endpoints.map(lbEndpointField);
  return encodeBody(g.locality, g.weight, endpoints);
}

/**
 * The body of a group that is one tree leaf's endpoint array, cached per
 * array: its endpoints' fields go straight into the body (no per-leaf
 * concatenation to copy again).
 */
export function runBody(run: readonly Endpoint[], locality: Locality, weight: number): GroupBody {
  const hit = leafBodyCache.get(run);
  if (hit && hit.weight === weight) return hit;
  const body: GroupBody = { bytes: encodeRunBody(locality, weight, run), weight, digest: undefined };
  leafBodyCache.set(run, body);
  return body;
}

/**
 * `encodeBody(l, weightSum, run.map(lbEndpointField))`, with ASCII addresses
 * (every IP address) written in place: a leaf's body is its only copy of its
 * endpoints' bytes, so it needs no per-endpoint parts to look up and copy.
 */
export function encodeRunBody(l: Locality, weightSum: number, run: readonly Endpoint[]): Uint8Array {
  let endpoints = 0;
  for (let i = 0; i < run.length; i++) {
    const ep = run[i]!;
    const n = asciiLength(ep.address);
    endpoints += n < 0 ? lbEndpointField(ep).length : lbEndpointSize(ep, n);
  }
  const weight = localityWeight(weightSum);
  const w = bodyHead(l, weight, endpoints);
  for (let i = 0; i < run.length; i++) {
    const ep = run[i]!;
    const n = asciiLength(ep.address);
    if (n < 0) w.raw(lbEndpointField(ep));
    else lbEndpointTail(lbEndpointHead(w, ep, n).ascii(2, ep.address), ep);
  }
  return bodyTail(w, weight);
}

function encodeBody(l: Locality, weightSum: number, endpoints: readonly Uint8Array[]): Uint8Array {
  let size = 0;
  for (const e of endpoints) size += e.length;
  const weight = localityWeight(weightSum);
  const w = bodyHead(l, weight, size);
  for (const e of endpoints) w.raw(e);
  return bodyTail(w, weight);
}

/** A writer sized for a group body with `endpoints` bytes of `lb_endpoints`, its locality written. */
function bodyHead(l: Locality, weight: number, endpoints: number): WireWriter {
  const { region, zone, subzone } = localityBytes(l);
  const locality =
    optionalFieldSize(1, region.length) + optionalFieldSize(2, zone.length) + optionalFieldSize(3, subzone.length);
  const w = new WireWriter(fieldSize(1, locality) + endpoints + fieldSize(3, varintFieldSize(1, weight)));
  return w.open(1, locality).optionalBytes(1, region).optionalBytes(2, zone).optionalBytes(3, subzone);
}

/** Ends a group body: its load_balancing_weight (already clamped). */
function bodyTail(w: WireWriter, weight: number): Uint8Array {
  return w.open(3, varintFieldSize(1, weight)).uint(1, weight).finish();
}

export function policyField(overprovisioningFactor: number): Uint8Array {
  const policy = varintFieldSize(1, overprovisioningFactor);
  return new WireWriter(fieldSize(4, fieldSize(3, policy)))
    .open(4, fieldSize(3, policy))
    .open(3, policy)
    .uint(1, overprovisioningFactor)
    .finish();
}

const localityCache = new WeakMap<Locality, { region: Uint8Array; zone: Uint8Array; subzone: Uint8Array }>();

/** UTF-8 of a locality's names, cached per Locality object (shared by an endpoint's every CLA). */
function localityBytes(l: Locality): { region: Uint8Array; zone: Uint8Array; subzone: Uint8Array } {
  let hit = localityCache.get(l);
  if (!hit) {
    hit = { region: utf8Bytes(l.region), zone: utf8Bytes(l.zone), subzone: utf8Bytes(l.subzone) };
    localityCache.set(l, hit);
  }
  return hit;
}
