/** `canopy version` (and `canopy --version`): this CLI's version; `-o json` for scripts. */
import type { Command } from 'commander';
import { packageVersion } from './common.js';
import { outputOption, print, type OutputFormat } from './output.js';

export function registerVersion(program: Command): void {
  program
    .command('version')
    .description('print the version of this canopy and of the Node.js running it')
    .addOption(outputOption())
    .action((opts: { output: OutputFormat }) => {
      const data = { canopy: packageVersion(), node: process.version };
      print(opts.output, data, () => `canopy ${data.canopy} (Node.js ${data.node})\n`);
    });
}
