/**
 * A grpc-js xDS client (@grpc/grpc-js-xds, through the demo's echo client)
 * in a process of its own: `node xds-probe.js XDS_ADDRESS TARGET NODE_ID`
 * calls `xds:///TARGET` every 200 ms until its stdin closes, then prints one
 * JSON line (calls before the first success, calls and failures after it,
 * the last error) and exits. Its own process, because grpc-js-xds keeps its
 * xDS client alive after the channel closes, which would hold a test file's
 * process open for minutes.
 */
import { xdsBootstrap } from '../../server/src/demo/bootstrap.js';
import { XdsEchoClient } from '../../server/src/demo/xds-client.js';

const [server, target, nodeId] = process.argv.slice(2);
if (!server || !target || !nodeId) {
  process.stderr.write('usage: xds-probe XDS_ADDRESS TARGET NODE_ID\n');
  process.exit(2);
}
const client = new XdsEchoClient({
  target: `xds:///${target}`,
  bootstrap: xdsBootstrap({ serverUri: server, nodeId, locality: { region: 'r1', zone: 'a', subzone: '' } }),
});
let open = true;
process.stdin.on('end', () => (open = false));
process.stdin.resume();
const summary = { before: 0, calls: 0, failures: 0, backends: {} as Record<string, number>, lastError: '' };
let served = false;
// Bounded: at most 10 minutes of calls, whatever the parent does.
const deadline = Date.now() + 600_000;
while (open && Date.now() < deadline) {
  try {
    const reply = await client.who(1000);
    served = true;
    summary.calls++;
    summary.backends[reply.backend_id] = (summary.backends[reply.backend_id] ?? 0) + 1;
    if (summary.calls === 1) process.stdout.write('served\n');
  } catch (err) {
    if (served) {
      summary.calls++;
      summary.failures++;
      summary.lastError = (err as Error).message;
    } else summary.before++;
  }
  await new Promise((r) => setTimeout(r, 200));
}
process.stdout.write(`${JSON.stringify(summary)}\n`);
process.exit(0);
