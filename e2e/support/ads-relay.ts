/**
 * A SotW ADS relay between an Envoy and Canopy that can hold back every response of one type: the
 * server an Envoy's warming rule guards against (one that stays silent after a Cluster change), made
 * from Canopy's own responses. Frames pass through as bytes (identity serializers); only a response's
 * `type_url` is decoded, to decide whether it is dropped. It can also add a copy of one Listener under
 * another name to each LDS response (two listeners on one address in one update, which Canopy never
 * sends): the copy is decoded and re-encoded with only its name changed (its filters stay `Any` bytes).
 */
import * as grpc from '@grpc/grpc-js';
import { messageType } from '../../server/src/wire/protos.js';

const ADS = '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources';
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
  const server = new grpc.Server();
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
  } as unknown as grpc.ServiceDefinition;
  server.addService(definition, {
    StreamAggregatedResources: (down: grpc.ServerDuplexStream<Buffer, Buffer>) => {
      const up = client.makeBidiStreamRequest(ADS, identity, identity, down.metadata);
      up.on('data', (b: Buffer) => {
        if (dropping !== undefined && typeOf(b) === dropping) dropped++;
        else down.write(withCopy(b));
      });
      up.on('end', () => down.end());
      up.on('error', (err: grpc.ServiceError) => down.destroy(err));
      down.on('data', (b: Buffer) => up.write(b));
      down.on('end', () => up.end());
      down.on('error', () => up.cancel());
      down.on('cancelled', () => up.cancel());
    },
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
    close: () =>
      new Promise<void>((resolve) => {
        client.close();
        server.tryShutdown(() => resolve());
        setTimeout(() => server.forceShutdown(), 1000).unref();
      }),
  };
}
