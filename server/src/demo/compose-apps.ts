/**
 * The compose demo's two small programs (their flags are parsed in cli/demo.ts):
 * - `canopy demo-app`: an Echo backend that answers Who with its identity;
 * - `canopy demo-call`: a client that calls Echo through its sidecar's
 *   outbound port and prints where each request went, with a running tally.
 */
import * as grpc from '@grpc/grpc-js';
import { startBackend } from './backend.js';
import { echoService, type WhoReply } from './echo-proto.js';

export interface DemoAppOptions {
  readonly id: string;
  readonly host: string;
  readonly port: number;
  readonly region: string;
  readonly zone: string;
  readonly subzone: string;
}

export async function runDemoApp(values: DemoAppOptions): Promise<void> {
  const b = await startBackend({
    id: values.id,
    host: values.host,
    port: values.port,
    locality: { region: values.region, zone: values.zone, subzone: values.subzone },
  });
  process.stdout.write(`demo-app ${b.id} serving Echo on ${b.address}:${b.port}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await b.stop();
}

export interface DemoCallOptions {
  readonly target: string;
  /** 0: until a signal. */
  readonly count: number;
  readonly intervalMs: number;
}

export async function runDemoCall(values: DemoCallOptions): Promise<void> {
  const count = values.count;
  const interval = Math.max(10, values.intervalMs);
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
