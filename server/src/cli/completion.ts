/**
 * `canopy completion bash|zsh`: a shell completion script for the subcommands (nested ones too), their
 * flags, and the flags' values (a flag's choices, file names for a flag that takes a file), read from
 * the same commander definitions the parser uses, so it cannot drift from them.
 */
import { Argument, type Command, type Option } from 'commander';

export function registerCompletion(program: Command): void {
  program
    .command('completion')
    .description('print a shell completion script: source <(canopy completion bash)')
    .addArgument(new Argument('<shell>', 'the shell').choices(['bash', 'zsh']))
    .action((shell: 'bash' | 'zsh') => {
      process.stdout.write(completionScript(program, shell));
    });
}

interface CommandSpec {
  /** Subcommand names from the top, space-separated ('' for canopy itself). */
  readonly path: string;
  readonly cmd: Command;
}

function walk(cmd: Command, path: string): CommandSpec[] {
  return [{ path, cmd }, ...cmd.commands.flatMap((c) => walk(c, path === '' ? c.name() : `${path} ${c.name()}`))];
}

const visible = (cmd: Command): Option[] => cmd.options.filter((o) => !o.hidden);
const names = (o: Option): string[] => [o.long, o.short].filter((f): f is string => f !== undefined);
/** A flag whose value is a path: its value completes as a file name. */
const takesFile = (o: Option): boolean => /<(file|dir)>/.test(o.flags);
const quote = (s: string): string => `"${s}"`;

/** What the flags that take a value complete to, as `case` arms on "PATH|FLAG". */
function valueArms(specs: readonly CommandSpec[]): string[] {
  const arms: string[] = [];
  for (const { path, cmd } of specs) {
    for (const o of visible(cmd)) {
      if (!o.required && !o.optional) continue;
      const patterns = names(o)
        .map((n) => quote(`${path}|${n}`))
        .join('|');
      const reply = o.argChoices
        ? `COMPREPLY=( $(compgen -W "${o.argChoices.join(' ')}" -- "$cur") )`
        : takesFile(o)
          ? 'COMPREPLY=( $(compgen -f -- "$cur") )'
          : 'COMPREPLY=()';
      arms.push(`    ${patterns}) ${reply}; return ;;`);
    }
  }
  return arms;
}

/** The words each command completes to: its subcommands, flags and positional choices. */
function wordArms(specs: readonly CommandSpec[]): string[] {
  return specs.map(({ path, cmd }) => {
    const words = [
      ...cmd.commands.flatMap((c) => [c.name(), ...c.aliases()]),
      ...visible(cmd).flatMap(names),
      ...cmd.registeredArguments.flatMap((a: Argument) => a.argChoices ?? []),
      '--help',
      ...(path === '' ? ['--version'] : []),
    ];
    return `    ${quote(path)}) words="${[...new Set(words)].join(' ')}" ;;`;
  });
}

export function completionScript(program: Command, shell: 'bash' | 'zsh'): string {
  const specs = walk(program, '');
  // A subcommand typed by its name or an alias (`ps`) is known by its name from then on.
  const subcommandArms = specs
    .filter((s) => s.path !== '')
    .map((s) => {
      const parent = s.path.includes(' ') ? s.path.slice(0, s.path.lastIndexOf(' ')) : '';
      const typed = [s.cmd.name(), ...s.cmd.aliases()].map((n) => quote(`${parent}/${n}`)).join('|');
      return `      ${typed}) cmd="\${cmd:+$cmd }${s.cmd.name()}" ;;`;
    });
  const body = `_canopy() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="" cmd="" words="" i w
  [ "$COMP_CWORD" -gt 0 ] && prev="\${COMP_WORDS[COMP_CWORD-1]}"
  # The subcommand path typed so far (e.g. "agent uninstall").
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    case "$cmd/$w" in
${subcommandArms.join('\n')}
    esac
  done
  # The value of the flag just typed.
  case "$cmd|$prev" in
${valueArms(specs).join('\n')}
  esac
  case "$cmd" in
${wordArms(specs).join('\n')}
  esac
  COMPREPLY=( $(compgen -W "$words" -- "$cur") )
  if [ \${#COMPREPLY[@]} -eq 0 ] && [[ "$cur" != -* ]]; then COMPREPLY=( $(compgen -f -- "$cur") ); fi
}
complete -F _canopy canopy
`;
  return shell === 'zsh' ? `autoload -U +X bashcompinit && bashcompinit\n${body}` : body;
}
