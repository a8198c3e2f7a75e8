/** `canopy agent`: the node agent that loads Canopy's locality trees into the kernel. */
import type { Command } from 'commander';
import { AGENT_HELP, AGENT_USAGE, AgentFlagError, parseAgentArgs, parseUninstallArgs } from '../agent/cli-agent.js';
import { CliError, EXIT_USAGE } from './common.js';
import { passthrough, rawArgs, wantsHelp } from './passthrough.js';
import { untilSignal } from '../platform/signals.js';

export function registerAgent(program: Command): void {
  const cmd = program
    .command('agent')
    .description('run the node agent (kernel datapath); `agent uninstall` removes it');
  passthrough(cmd, AGENT_HELP).action(async (_o: unknown, c: Command) => {
    const args = rawArgs(c);
    if (wantsHelp(args)) {
      process.stdout.write(`${AGENT_HELP}\n`);
      return;
    }
    let opts;
    try {
      if (args[0] === 'uninstall') {
        const { Datapath } = await import('../agent/datapath.js');
        for (const line of Datapath.uninstall(parseUninstallArgs(args.slice(1)))) process.stdout.write(`${line}\n`);
        return;
      }
      opts = parseAgentArgs(args);
    } catch (err) {
      if (!(err instanceof AgentFlagError) && (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') !== true)
        throw err;
      throw new CliError(`agent: ${(err as Error).message}\nusage:\n${AGENT_USAGE}`, EXIT_USAGE);
    }
    const { startAgent } = await import('../agent/agent.js');
    const agent = await startAgent(opts);
    // On a signal the datapath keeps serving from the pinned maps; a new agent resumes it.
    await untilSignal(() => agent.stop());
  });
}
