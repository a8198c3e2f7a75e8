/** A demo backend: a real gRPC server that answers Who with its identity. */
import * as grpc from '@grpc/grpc-js';
import type { Locality } from '../domain/locality.js';
import { echoService, type WhoReply } from './echo-proto.js';

export interface Backend {
  readonly id: string;
  readonly address: string;
  readonly port: number;
  stop(): Promise<void>;
}

export async function startBackend(opts: {
  id: string;
  host: string;
  port?: number;
  locality: Locality;
}): Promise<Backend> {
  const server = new grpc.Server();
  const reply: WhoReply = {
    backend_id: opts.id,
    address: opts.host,
    region: opts.locality.region,
    zone: opts.locality.zone,
    subzone: opts.locality.subzone,
  };
  server.addService(echoService().service, {
    Who: (_call: unknown, cb: grpc.sendUnaryData<WhoReply>) => cb(null, reply),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${opts.host}:${opts.port ?? 0}`, grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  return {
    id: opts.id,
    address: opts.host,
    port,
    stop: () =>
      new Promise<void>((resolve) => {
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
