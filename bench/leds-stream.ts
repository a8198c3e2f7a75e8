/**
 * One Envoy-like LEDS client on a delta ADS stream, as the bench's client
 * process runs it: subscribe to a service's ClusterLoadAssignment, read the
 * LEDS collections its CLA names and subscribe to them, ACK every response by
 * its nonce at once. The stream is ready once it holds its CLA and a first
 * response of collection members (or a CLA naming no collection).
 */
import type { ClientDuplexStream } from '@grpc/grpc-js';
import { ENDPOINT_TYPE, LEDS_TYPE } from '../server/src/resources/type-urls.js';
import { collectionsInResponse, deltaRequest, deltaResponseHead } from './delta-wire.js';

export { LEDS_TYPE };

export interface LedsStreamHooks {
  /** Every response, after its ACK was written. */
  response(buf: Buffer, typeUrl: string): void;
  /** Once: the stream holds its CLA and its members; `collections` is how many its CLA named. */
  ready(collections: number): void;
}

export function runLedsStream(
  call: ClientDuplexStream<Buffer, Buffer>,
  opts: { id: string; service: string; region: string; zone: string; subzone: string },
  hooks: LedsStreamHooks,
): void {
  const subscribed = new Set<string>();
  let waitingMembers = false;
  let ready = false;
  const becomeReady = (): void => {
    if (ready) return;
    ready = true;
    hooks.ready(subscribed.size);
  };
  call.on('data', (buf: Buffer) => {
    const head = deltaResponseHead(buf);
    call.write(deltaRequest({ typeUrl: head.typeUrl, nonce: head.nonce }));
    if (head.typeUrl === ENDPOINT_TYPE) {
      const fresh = collectionsInResponse(buf, head).filter((n) => !subscribed.has(n));
      for (const n of fresh) subscribed.add(n);
      if (fresh.length > 0) {
        call.write(deltaRequest({ typeUrl: LEDS_TYPE, subscribe: fresh }));
        waitingMembers = true;
      }
      hooks.response(buf, head.typeUrl);
      if (!waitingMembers) becomeReady();
    } else {
      hooks.response(buf, head.typeUrl);
      if (head.typeUrl === LEDS_TYPE && waitingMembers) becomeReady();
    }
  });
  call.write(
    deltaRequest({
      typeUrl: ENDPOINT_TYPE,
      subscribe: [opts.service],
      node: { id: opts.id, userAgent: 'envoy', region: opts.region, zone: opts.zone, subzone: opts.subzone },
    }),
  );
}
