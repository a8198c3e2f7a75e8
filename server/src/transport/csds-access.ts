/**
 * CSDS lists every connected node and what it was sent: an admin surface, so
 * it asks what the admin API asks. A call is served when it carries the
 * admin token (`authorization: Bearer <token>` metadata), or its client
 * certificate's SPIFFE ID has a read rule with `csds: true`, or no admin
 * token is configured and the caller is on loopback (as the admin API then
 * serves only loopback), or reads are open (`--admin-open-reads`). Put in
 * front of the CSDS handlers, whatever they answer.
 */
import { timingSafeEqual } from 'node:crypto';
import ipaddr from 'ipaddr.js';
import * as grpc from '@grpc/grpc-js';

/** What the check reads of a unary or streaming call. */
export type CsdsCall = Pick<grpc.ServerUnaryCall<unknown, unknown>, 'metadata' | 'getPeer' | 'getAuthContext'>;

export interface CsdsAccessOptions {
  readonly adminToken?: string;
  readonly openReads?: boolean;
  /** Whether the caller's certificate identity may read CSDS (mTLS read rules). */
  readonly identityAllowed?: (call: CsdsCall) => boolean;
}

/** Why this call may not read CSDS (a status to end it with), or undefined when it may. */
export function csdsRefusal(call: CsdsCall, opts: CsdsAccessOptions): grpc.StatusObject | undefined {
  if (opts.openReads) return undefined;
  const header = call.metadata.get('authorization')[0];
  const presented = typeof header === 'string' && header.startsWith('Bearer ') ? header.slice(7).trim() : undefined;
  if (opts.adminToken !== undefined && presented !== undefined) {
    if (sameSecret(presented, opts.adminToken)) return undefined;
    return status(grpc.status.PERMISSION_DENIED, 'CSDS: the bearer token is not the admin token');
  }
  if (opts.identityAllowed?.(call)) return undefined;
  if (opts.adminToken === undefined && isLoopback(call.getPeer())) return undefined;
  return status(
    grpc.status.UNAUTHENTICATED,
    'CSDS is an admin surface: send the admin token as "authorization: Bearer <token>" metadata, ' +
      'or use a client certificate whose SPIFFE ID has a read rule with csds: true',
  );
}

/** The CSDS handlers, each refusing a call `csdsRefusal` refuses before it reads anything. */
export function guardCsds(
  handlers: grpc.UntypedServiceImplementation,
  opts: CsdsAccessOptions,
): grpc.UntypedServiceImplementation {
  const out: grpc.UntypedServiceImplementation = {};
  for (const [name, handler] of Object.entries(handlers)) {
    out[name] = ((call: grpc.ServerUnaryCall<unknown, unknown>, callback?: grpc.sendUnaryData<unknown>) => {
      const refused = csdsRefusal(call, opts);
      if (!refused) return (handler as (c: unknown, cb?: unknown) => void)(call, callback);
      if (callback) return callback(refused, null);
      call.on('error', () => {});
      call.emit('error', refused);
    }) as grpc.UntypedHandleCall;
  }
  return out;
}

function status(code: grpc.status, details: string): grpc.StatusObject {
  return { code, details, metadata: new grpc.Metadata() };
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** `getPeer()` is `host:port`, `[v6]:port` or a bare host. */
function isLoopback(peer: string): boolean {
  const host = peer.startsWith('[') ? peer.slice(1, peer.indexOf(']')) : peer.replace(/:\d+$/, '');
  return ipaddr.isValid(host) && ipaddr.process(host).range() === 'loopback';
}
