/**
 * `canopy demo --envoy`, node agent part: a workload process the demo starts as
 * `node vip-caller.js CGROUP VIP PORT N`. It moves itself into CGROUP (the one the agent attached to)
 * before it connects anywhere, then makes N plain gRPC calls to VIP:PORT, each on a new channel (a new
 * connect(), so a new choice by the kernel), and prints the backend ids that answered as one JSON line.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { echoService, type WhoReply } from './echo-proto.js';

const [cgroup = '', vip = '', port = '', n = '1'] = process.argv.slice(2);
writeFileSync(path.join(cgroup, 'cgroup.procs'), String(process.pid));
const Echo = echoService();
const answers: string[] = [];
for (let i = 0; i < Number(n); i++) {
  const client = new Echo(`${vip}:${port}`, grpc.credentials.createInsecure());
  const who = (client as unknown as Record<string, (...a: unknown[]) => void>)['Who']!.bind(client);
  answers.push(
    await new Promise<string>((resolve) =>
      who({ caller: 'vip' }, { deadline: Date.now() + 2000 }, (err: grpc.ServiceError | null, r?: WhoReply) =>
        resolve(err || !r ? `error: ${err?.details || err?.message}` : r.backend_id),
      ),
    ),
  );
  client.close();
}
process.stdout.write(`${JSON.stringify(answers)}\n`);
