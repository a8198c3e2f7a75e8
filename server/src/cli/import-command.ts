/** `canopy import istio|kuma|k8s FILE…` routed to the importer's own parsing (import.ts). */
import type { Command } from 'commander';
import { CliError, EXIT_USAGE } from './common.js';
import { passthrough, rawArgs, wantsHelp } from './passthrough.js';

const HELP = `Usage: canopy import istio|kuma|k8s FILE...

Print the Canopy config (mesh.yaml services) that Istio, Kuma or Kubernetes documents mean, with notes
on what was not imported. Multi-document YAML files are read whole. No flags.`;

export function registerImport(program: Command): void {
  const cmd = program.command('import').description('print the Canopy config for Istio, Kuma or Kubernetes documents');
  passthrough(cmd, HELP).action(async (_o: unknown, c: Command) => {
    const args = rawArgs(c);
    if (wantsHelp(args)) return void process.stdout.write(`${HELP}\n`);
    const flag = args.find((a) => a.startsWith('-'));
    if (flag !== undefined)
      throw new CliError(`import: unknown option '${flag}' (import takes no flags)\n${HELP}`, EXIT_USAGE);
    const { runImport } = await import('./import.js');
    process.exitCode = await runImport(args, process.stdout, process.stderr);
  });
}
