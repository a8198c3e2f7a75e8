/**
 * The `canopy` command: one subcommand per file in this folder, parsed by commander.
 * Exit codes, the same for every subcommand: 0 ok, 1 runtime failure, 2 usage (an unknown command or
 * flag, a bad flag value).
 */
import { Command, CommanderError } from 'commander';
import { formatFieldErrors } from '../domain/errors.js';
import { registerAgent } from './agent.js';
import { registerApply } from './apply.js';
import { registerBootstrap } from './bootstrap.js';
import { registerCompletion } from './completion.js';
import { registerDelete } from './delete.js';
import { registerDemo } from './demo.js';
import { CliError, EXIT_USAGE, packageVersion } from './common.js';
import { registerExplain } from './explain.js';
import { registerGet } from './get.js';
import { registerHealth } from './health.js';
import { registerImport } from './import.js';
import { registerProxyStatus } from './proxy-status.js';
import { registerSchema } from './schema.js';
import { registerServe } from './serve.js';
import { registerValidate } from './validate.js';
import { registerVersion } from './version.js';

export function buildProgram(): Command {
  const program = new Command('canopy')
    .description('Canopy: a locality-aware xDS control plane')
    .version(packageVersion(), '-V, --version', 'print the version and exit')
    .showHelpAfterError('(add --help for usage)')
    .showSuggestionAfterError(true)
    // A subcommand's flags belong to it: `agent uninstall --cgroup DIR` is not the agent's --cgroup.
    .enablePositionalOptions()
    // Errors read `canopy: unknown option '--x'`, as the CLI's other errors do; subcommands inherit this.
    .configureOutput({ outputError: (text, write) => write(`canopy: ${text.replace(/^error: /, '')}`) });
  for (const register of [
    registerServe,
    registerGet,
    registerApply,
    registerDelete,
    registerHealth,
    registerProxyStatus,
    registerValidate,
    registerBootstrap,
    registerSchema,
    registerExplain,
    registerImport,
    registerAgent,
    registerDemo,
    registerCompletion,
    registerVersion,
  ])
    register(program);
  program.commands.forEach(exitOverrideDeep);
  program.exitOverride();
  return program;
}

/** Usage errors exit 2 and help/version 0, in every subcommand (commander's own default is 1). */
function exitOverrideDeep(cmd: Command): void {
  cmd.exitOverride();
  cmd.commands.forEach(exitOverrideDeep);
}

/** Runs one command line; resolves with the exit code (errors are printed by the caller). */
export async function runCanopy(argv: string[]): Promise<number> {
  const program = buildProgram();
  if (argv.length === 0) {
    process.stderr.write(program.helpInformation());
    return EXIT_USAGE;
  }
  try {
    await program.parseAsync(argv, { from: 'user' });
    return process.exitCode === undefined ? 0 : Number(process.exitCode);
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help')
        return 0;
      return EXIT_USAGE;
    }
    throw err;
  }
}

/** How an error that ends a command reads: `canopy: message`, never a stack. */
export function errorLine(err: unknown): { line: string; code: number } {
  if (err instanceof CliError) return { line: `canopy: ${err.message}\n`, code: err.exitCode };
  const e = err as { code?: string; message?: string; errors?: Parameters<typeof formatFieldErrors>[0] };
  return {
    line: `canopy: ${e.code ? `[${e.code}] ` : ''}${e.errors ? formatFieldErrors(e.errors) : (e.message ?? String(err))}\n`,
    code: 1,
  };
}
