/**
 * A SotW ADS relay between an Envoy and Canopy that can hold back every response of one type: the
 * server an Envoy's warming rule guards against (one that stays silent after a Cluster change), made
 * from Canopy's own responses. Frames pass through as bytes (identity serializers); only a response's
 * `type_url` is decoded, to decide whether it is dropped. It can also add a copy of one Listener under
 * another name to each LDS response (two listeners on one address in one update, which Canopy never
 * sends): the copy is decoded and re-encoded with only its name changed (its filters stay `Any` bytes).
 * It relays delta ADS too, and can make one service's endpoints invalid in every response (port 70000,
 * which a real Envoy's proto validation refuses): a NACK provoked from outside Canopy, so that the
 * server's recovery from a rejected response is tested whatever Canopy itself would refuse to send.
 */
import * as grpc from '@grpc/grpc-js';
import { LEDS_PREFIX } from '../../server/src/resources/endpoint/leds-names.js';
import { messageType } from '../../server/src/wire/protos.js';

const ADS = '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources';
const DELTA_ADS = '/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources';
/** The endpoint types whose resources `corrupt` edits, and their message types. */
const ENDPOINT_MESSAGES: Record<string, string> = {
  'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment':
    'envoy.config.endpoint.v3.ClusterLoadAssignment',
  'type.googleapis.com/envoy.config.endpoint.v3.LbEndpoint': 'envoy.config.endpoint.v3.LbEndpoint',
};
/** Out of range for a port: Envoy's `port_value` constraint is lte 65535. */
export const BAD_PORT = 70000;
const identity = (b: Buffer): Buffer => b;
const LDS = 'type.googleapis.com/envoy.config.listener.v3.Listener';
type Any = { type_url: string; value: Buffer };

export interface AdsRelay {
  /** HOST:PORT for the Envoy's bootstrap. */
  readonly address: string;
  /** Responses of this type are dropped from now on (undefined: none). */
  drop(typeUrl: string | undefined): void;
  /** How many responses were dropped. */
  dropped(): number;
  /** From now on each LDS response also carries Listener `name` copied as `copy` (undefined: off). */
  duplicateListener(d: { name: string; copy: string } | undefined): void;
  /**
   * From now on every endpoint of this service (its CLA, or its LEDS members) has port 70000 (what Envoy
   * refuses), or with `how: 'address'` the address `not-an-ip` (what grpc-js refuses); undefined: off.
   */
  corrupt(service: string | undefined, how?: 'port' | 'address'): void;
  /** How many responses had a resource made invalid. */
  corrupted(): number;
  close(): Promise<void>;
}

export async function startAdsRelay(upstream: string): Promise<AdsRelay> {
  const response = messageType('envoy.service.discovery.v3.DiscoveryResponse');
  const listener = messageType('envoy.config.listener.v3.Listener');
  const typeOf = (b: Buffer) => String((response.toObject(response.decode(b)) as { type_url?: string }).type_url);
  const client = new grpc.Client(upstream, grpc.credentials.createInsecure());
  let dropping: string | undefined;
  let dropped = 0;
  let duplicate: { name: string; copy: string } | undefined;
  const nameOf = (b: Uint8Array) => (listener.toObject(listener.decode(b)) as { name?: string }).name;
  const withCopy = (b: Buffer): Buffer => {
    if (!duplicate) return b;
    const msg = response.toObject(response.decode(b), { bytes: Buffer }) as { type_url?: string; resources?: Any[] };
    const original = msg.type_url === LDS ? msg.resources?.find((r) => nameOf(r.value) === duplicate!.name) : undefined;
    if (!original) return b;
    const copy = listener.toObject(listener.decode(original.value), { bytes: Buffer });
    copy['name'] = duplicate.copy;
    const value = Buffer.from(listener.encode(listener.fromObject(copy)).finish());
    const resources = [...(msg.resources ?? []), { type_url: LDS, value }];
    return Buffer.from(response.encode(response.fromObject({ ...msg, resources })).finish());
  };
  let bad: string | undefined;
  let spoilAddress = false;
  let corrupted = 0;
  const spoil = (typeUrl: string, value: Buffer): Buffer => {
    const t = messageType(ENDPOINT_MESSAGES[typeUrl]!);
    const m = t.toObject(t.decode(value), { bytes: Buffer, longs: Number });
    spoilEndpoints(m, spoilAddress);
    return Buffer.from(t.encode(t.fromObject(m)).finish());
  };
  const spoilSotw = (b: Buffer): Buffer => {
    const msg = response.toObject(response.decode(b), { bytes: Buffer }) as { type_url?: string; resources?: Any[] };
    const type = ENDPOINT_MESSAGES[msg.type_url ?? ''];
    if (bad === undefined || !type) return b;
    let hit = false;
    const resources = (msg.resources ?? []).map((r) => {
      const cla = messageType(type).toObject(messageType(type).decode(r.value)) as { cluster_name?: string };
      if (cla.cluster_name !== bad) return r;
      hit = true;
      return { type_url: r.type_url, value: spoil(r.type_url, r.value) };
    });
    if (!hit) return b;
    corrupted++;
    return Buffer.from(response.encode(response.fromObject({ ...msg, resources })).finish());
  };
  const delta = messageType('envoy.service.discovery.v3.DeltaDiscoveryResponse');
  const spoilDelta = (b: Buffer): Buffer => {
    const msg = delta.toObject(delta.decode(b), { bytes: Buffer }) as {
      type_url?: string;
      resources?: { name: string; resource?: Any }[];
    };
    if (bad === undefined || !ENDPOINT_MESSAGES[msg.type_url ?? '']) return b;
    const mine = (name: string) => name === bad || name.startsWith(`${LEDS_PREFIX}${bad}/`);
    let hit = false;
    const resources = (msg.resources ?? []).map((r) => {
      if (!r.resource || !mine(r.name)) return r;
      hit = true;
      return { ...r, resource: { type_url: r.resource.type_url, value: spoil(r.resource.type_url, r.resource.value) } };
    });
    if (!hit) return b;
    corrupted++;
    return Buffer.from(delta.encode(delta.fromObject({ ...msg, resources })).finish());
  };
  const server = new grpc.Server();
  const relay =
    (path: string, edit: (b: Buffer) => Buffer | undefined) =>
    (down: grpc.ServerDuplexStream<Buffer, Buffer>): void => {
      const up = client.makeBidiStreamRequest(path, identity, identity, down.metadata);
      up.on('data', (b: Buffer) => {
        const out = edit(b);
        if (out) down.write(out);
      });
      up.on('end', () => down.end());
      up.on('error', (err: grpc.ServiceError) => down.destroy(err));
      down.on('data', (b: Buffer) => up.write(b));
      down.on('end', () => up.end());
      down.on('error', () => up.cancel());
      down.on('cancelled', () => up.cancel());
    };
  const definition = {
    StreamAggregatedResources: {
      path: ADS,
      requestStream: true,
      responseStream: true,
      requestSerialize: identity,
      requestDeserialize: identity,
      responseSerialize: identity,
      responseDeserialize: identity,
    },
    DeltaAggregatedResources: {
      path: DELTA_ADS,
      requestStream: true,
      responseStream: true,
      requestSerialize: identity,
      requestDeserialize: identity,
      responseSerialize: identity,
      responseDeserialize: identity,
    },
  } as unknown as grpc.ServiceDefinition;
  server.addService(definition, {
    StreamAggregatedResources: relay(ADS, (b) => {
      if (dropping === undefined || typeOf(b) !== dropping) return spoilSotw(withCopy(b));
      dropped++;
      return undefined;
    }),
    DeltaAggregatedResources: relay(DELTA_ADS, spoilDelta),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  return {
    address: `127.0.0.1:${port}`,
    drop: (t) => void (dropping = t),
    dropped: () => dropped,
    duplicateListener: (d) => void (duplicate = d),
    corrupt: (service, how) => {
      bad = service;
      spoilAddress = how === 'address';
    },
    corrupted: () => corrupted,
    close: () =>
      new Promise<void>((resolve) => {
        client.close();
        // A stream its client never ended (grpc-js-xds keeps one open after its channel closes) is cut after 1 s.
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 1000);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }),
  };
}

/** Every socket address in a decoded message, at any depth: its port set to BAD_PORT, or its address spoilt. */
function spoilEndpoints(m: unknown, address: boolean): void {
  if (Array.isArray(m)) for (const x of m) spoilEndpoints(x, address);
  else if (m && typeof m === 'object' && !Buffer.isBuffer(m)) {
    const o = m as Record<string, unknown>;
    for (const k of Object.keys(o)) {
      if (k === 'socket_address' && o[k] && typeof o[k] === 'object') {
        const sock = o[k] as Record<string, unknown>;
        if (address) sock['address'] = 'not-an-ip';
        else sock['port_value'] = BAD_PORT;
      } else spoilEndpoints(o[k], address);
    }
  }
}
