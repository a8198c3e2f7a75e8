/** `canopy explain` routed to its own parsing (explain.ts). */
import type { Command } from 'commander';
import { passthrough, rawArgs, wantsHelp } from './passthrough.js';

const HELP = `Usage: canopy explain (--admin URL | --config FILE) --service S [flags]

Why a client at a placement gets its CLA: each endpoint's priority and reason, locality weights and
gRPC shares; with --policy, the CLA under a proposed policy and what would change.

Options:
  --admin <url>       ask a running server's admin API (e.g. http://127.0.0.1:18080)
  --config <file>     or explain a config file offline
  --service <name>    the service (required)
  --region, --zone, --subzone, --network, --node, --cluster <value>
                      the client's placement (default: "")
  --label <k=v>       a client label (repeatable)
  --policy <file>     a proposed policy (YAML): show the CLA under it and the diff
  --json              print JSON instead of text (default: text)
  -h, --help          show help`;

export function registerExplain(program: Command): void {
  const cmd = program
    .command('explain')
    .description('why a client at a placement gets its CLA (from a server or a file)');
  passthrough(cmd, HELP).action(async (_o: unknown, c: Command) => {
    const args = rawArgs(c);
    if (wantsHelp(args)) return void process.stdout.write(`${HELP}\n`);
    const { runExplain } = await import('./explain.js');
    process.exitCode = await runExplain(args, process.stdout, process.stderr);
  });
}
