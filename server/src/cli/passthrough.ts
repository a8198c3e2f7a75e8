/**
 * Subcommands whose flags are parsed by their own module (node:util parseArgs, with errors naming the
 * flag): commander routes to them, prints their help, and hands them the arguments as typed.
 */
import type { Command } from 'commander';

/** The arguments after the subcommand's name(s), as the user typed them. */
export function rawArgs(cmd: Command): string[] {
  const names: string[] = [];
  for (let c: Command | null = cmd; c?.parent; c = c.parent) names.unshift(c.name());
  const argv = process.argv.slice(2);
  let i = 0;
  for (const name of names) {
    const at = argv.indexOf(name, i);
    if (at < 0) return cmd.args;
    i = at + 1;
  }
  return argv.slice(i);
}

/** A subcommand that takes any flags and prints `help` (its flags with their defaults) for --help. */
export function passthrough(cmd: Command, help: string): Command {
  return cmd
    .allowUnknownOption(true)
    .allowExcessArguments(true)
    .helpOption(false)
    .option('-h, --help', 'show help')
    .configureHelp({ formatHelp: () => `${help}\n` });
}

/** Exit code from a passthrough module's parse: `--help` prints the help and exits 0 before it runs. */
export function wantsHelp(args: readonly string[]): boolean {
  return args.includes('--help') || args.includes('-h');
}
