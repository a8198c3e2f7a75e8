/**
 * The compose demo's two small programs:
 * - `canopy demo-app`: an Echo backend that answers Who with its identity;
 * - `canopy demo-call`: a client that calls Echo through its sidecar's
 *   outbound port and prints where each request went, with a running tally.
 */
import * as grpc from '@grpc/grpc-js';
import { parseArgs } from 'node:util';
import { startBackend } from './backend.js';
import { echoService, type WhoReply } from './echo-proto.js';

export const DEMO_USAGE = `  canopy demo-app --id ID [--host H] [--port N] [--region R] [--zone Z] [--subzone S]
  canopy demo-call --target HOST:PORT [--count N] [--interval-ms N]`;

export async function runDemoApp(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      id: { type: 'string' },
      host: { type: 'string', default: '0.0.0.0' },
      port: { type: 'string', default: '50051' },
      region: { type: 'string', default: '' },
      zone: { type: 'string', default: '' },
      subzone: { type: 'string', default: '' },
    },
    strict: true,
  });
  if (!values.id) throw new Error('demo-app: --id is required');
  const b = await startBackend({
    id: values.id,
    host: values.host,
    port: Number(values.port),
    locality: { region: values.region, zone: values.zone, subzone: values.subzone },
  });
  process.stdout.write(`demo-app ${b.id} serving Echo on ${b.address}:${b.port}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await b.stop();
}

export async function runDemoCall(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      target: { type: 'string' },
      count: { type: 'string', default: '0' },
      'interval-ms': { type: 'string', default: '1000' },
    },
    strict: true,
  });
  if (!values.target) throw new Error('demo-call: --target is required');
  const count = Number(values.count);
  const interval = Math.max(10, Number(values['interval-ms']));
  const Echo = echoService();
  const client = new Echo(values.target, grpc.credentials.createInsecure());
  const tally = new Map<string, number>();
  let stop = false;
  process.once('SIGTERM', () => (stop = true));
  process.once('SIGINT', () => (stop = true));
  for (let i = 1; !stop && (count === 0 || i <= count); i++) {
    const line = await new Promise<string>((resolve) => {
      const fn = (client as unknown as Record<string, (...a: unknown[]) => void>)['Who']!.bind(client);
      fn({ caller: 'demo-call' }, { deadline: Date.now() + 2000 }, (err: grpc.ServiceError | null, r: WhoReply) => {
        const where = err
          ? `error: ${err.details || err.message}`
          : `${r.backend_id} (${r.region}/${r.zone}/${r.subzone})`;
        const key = err ? 'errors' : r.backend_id;
        tally.set(key, (tally.get(key) ?? 0) + 1);
        resolve(`request ${i} → ${where}   tally ${[...tally].map(([k, n]) => `${k}=${n}`).join(' ')}`);
      });
    });
    process.stdout.write(`${line}\n`);
    await new Promise((r) => setTimeout(r, interval));
  }
  client.close();
}
