/**
 * A proxyless gRPC application as the README tells users to write one: grpc-js with
 * @grpc/grpc-js-xds registered, its bootstrap from GRPC_XDS_BOOTSTRAP, a channel to `xds:///NAME`.
 * Calls Echo.Who until one answer (or 15 s), prints it as JSON and exits 0; 1 on no answer.
 *
 *   GRPC_XDS_BOOTSTRAP=bootstrap.json node xds-app.js xds:///echo
 */
import * as grpc from '@grpc/grpc-js';
import * as grpcXds from '@grpc/grpc-js-xds';
import { echoService, type WhoReply } from '../../server/src/demo/echo-proto.js';

grpcXds.register();
const Echo = echoService();
const client = new Echo(process.argv[2] ?? 'xds:///echo', grpc.credentials.createInsecure());
const who = (client as unknown as Record<string, (...a: unknown[]) => void>)['Who']!.bind(client);
const deadline = Date.now() + 15_000;
let last = '';
while (Date.now() < deadline) {
  const reply = await new Promise<WhoReply | undefined>((resolve) =>
    who({ caller: 'xds-app' }, { deadline: Date.now() + 2000 }, (err: grpc.ServiceError | null, r: WhoReply) => {
      if (err) last = err.details || err.message;
      resolve(err ? undefined : r);
    }),
  );
  if (reply) {
    process.stdout.write(`${JSON.stringify(reply)}\n`);
    process.exit(0);
  }
  await new Promise((r) => setTimeout(r, 200));
}
process.stderr.write(`no answer within 15 s: ${last}\n`);
process.exit(1);
