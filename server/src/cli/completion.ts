/**
 * `canopy completion bash|zsh`: a shell completion script for the subcommands and their flags, read
 * from the same commander definitions the parser uses (so it cannot drift from them).
 */
import { Argument, type Command } from 'commander';

export function registerCompletion(program: Command): void {
  program
    .command('completion')
    .description('print a shell completion script: source <(canopy completion bash)')
    .addArgument(new Argument('<shell>', 'the shell').choices(['bash', 'zsh']))
    .action((shell: 'bash' | 'zsh') => {
      process.stdout.write(completionScript(program, shell));
    });
}

export function completionScript(program: Command, shell: 'bash' | 'zsh'): string {
  const commands = program.commands.map((c) => c.name());
  const cases = program.commands
    .map((c) => {
      const words = [
        ...c.options.flatMap((o) => [o.long, o.short].filter((f): f is string => f !== undefined)),
        ...c.registeredArguments.flatMap((a) => a.argChoices ?? []),
      ];
      return `    ${c.name()}) words="${[...new Set([...words, '--help'])].join(' ')}" ;;`;
    })
    .join('\n');
  const body = `_canopy() {
  local cur words
  cur="\${COMP_WORDS[COMP_CWORD]}"
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=( $(compgen -W "${commands.join(' ')} --help --version" -- "$cur") )
    return
  fi
  case "\${COMP_WORDS[1]}" in
${cases}
    *) words="" ;;
  esac
  COMPREPLY=( $(compgen -W "$words" -- "$cur") )
  [ \${#COMPREPLY[@]} -eq 0 ] && COMPREPLY=( $(compgen -f -- "$cur") )
}
complete -F _canopy canopy
`;
  return shell === 'zsh' ? `autoload -U +X bashcompinit && bashcompinit\n${body}` : body;
}
