/**
 * `canopy agent`: the node agent that loads Canopy's locality trees into the kernel, and
 * `canopy agent uninstall`, which removes it. Flags are parsed here, as every subcommand's are.
 */
import path from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import { DEFAULT_PIN_DIR, type AgentOptions } from '../agent/agent-options.js';
import { keyValue, parseWorkload, WorkloadSpecError } from '../agent/workload-spec.js';
import type { Placement } from '../domain/locality.js';
import { readClientTls } from './admin-client.js';
import { intIn, tlsOptions, type ClientTlsFlags } from './common.js';
import { untilSignal } from '../platform/signals.js';

const PLACEMENT_FLAGS = ['region', 'zone', 'subzone', 'network', 'cluster'] as const;

interface AgentValues extends Partial<Record<(typeof PLACEMENT_FLAGS)[number], string>>, ClientTlsFlags {
  server: string;
  nodeId: string;
  cgroup: string;
  label: [string, string][];
  workload: string[];
  pinDir: string;
  graceMs?: number;
  metricsHost?: string;
  metricsPort?: number;
  logLevel?: string;
  maxServices?: number;
  maxNodes?: number;
  maxEndpoints?: number;
}

const HELP_AFTER = `
--workload CGROUP=k=v,... is a workload cgroup (relative to --cgroup, or absolute) with its own placement,
which its descendant cgroups share; a missing cgroup is skipped with a logged reason. The set can be
replaced while the agent runs: PUT /workloads {"workloads": ["CGROUP=k=v,...", ...]} on the metrics port.

  canopy agent uninstall --cgroup DIR [--pin-dir DIR]   detach the program and remove the pins (and so the maps)

Requires Linux 5.14 or newer, root (or CAP_BPF + CAP_NET_ADMIN), cgroup v2 and bpffs (docs/node-agent.md).`;

function hostPort(raw: string): string {
  if (!/^[^:]+:\d+$/.test(raw) && !/^\[[^\]]+\]:\d+$/.test(raw)) throw new InvalidArgumentError('must be HOST:PORT.');
  return raw;
}

function collectLabel(raw: string, previous: [string, string][]): [string, string][] {
  try {
    return [...previous, keyValue(raw, '--label')];
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

const REQUIRED = ['server', 'nodeId', 'cgroup'] as const;

/**
 * The agent's flags on `cmd` (the running command, or a bare one for parseAgentArgs). On the running
 * command the three required flags are checked by its action (requireAgentFlags), not by commander:
 * commander checks a parent's mandatory options for its subcommands too, and `agent uninstall` has
 * its own --cgroup and no --server.
 */
function agentFlags(cmd: Command, mandatory = true): Command {
  const required = (o: Option) => (mandatory ? o.makeOptionMandatory() : o);
  cmd
    .addOption(required(new Option('--server <host:port>', "Canopy's ADS (xDS) address").argParser(hostPort)))
    .addOption(required(new Option('--node-id <id>', "this node's id (also its `node` scope value)")))
    .addOption(
      required(
        new Option(
          '--cgroup <dir>',
          'cgroup v2 directory the program is attached to (its connects are steered)',
        ).argParser((v) => path.resolve(v)),
      ),
    );
  for (const flag of PLACEMENT_FLAGS) cmd.addOption(new Option(`--${flag} <value>`, `this node's ${flag}`));
  // TLS to --server when given a CA or a client certificate (its SPIFFE ID names --node-id under mTLS).
  for (const o of tlsOptions()) cmd.addOption(o);
  return cmd
    .addOption(new Option('--label <key=value>', 'a node label (repeatable)').argParser(collectLabel).default([]))
    .addOption(
      new Option('--workload <cgroup=k=v,...>', 'a workload cgroup with its own placement (repeatable)')
        .argParser((v: string, prev: string[]) => [...prev, v])
        .default([]),
    )
    .addOption(
      new Option('--pin-dir <dir>', 'bpffs directory for the pinned program and maps').default(DEFAULT_PIN_DIR),
    )
    .addOption(
      new Option('--grace-ms <n>', 'how long a replaced tree stays readable (default 200)').argParser(
        intIn(0, 600_000),
      ),
    )
    .addOption(new Option('--metrics-host <host>', '/metrics, /healthz, /debug/state (default 127.0.0.1)'))
    .addOption(new Option('--metrics-port <n>', 'the metrics port (default 19100; 0 = any)').argParser(intIn(0, 65535)))
    .addOption(new Option('--log-level <level>', 'pino level (default info)'))
    .addOption(new Option('--max-services <n>', 'service map size (default 4096)').argParser(intIn(1, 1 << 24)))
    .addOption(new Option('--max-nodes <n>', 'tree node slots (default 262144)').argParser(intIn(1, 1 << 26)))
    .addOption(
      new Option('--max-endpoints <n>', 'endpoint slots (default 1048576); kept on restart').argParser(
        intIn(1, 1 << 26),
      ),
    );
}

function uninstallFlags(cmd: Command): Command {
  return cmd
    .addOption(new Option('--cgroup <dir>', 'the cgroup the agent attached to').makeOptionMandatory())
    .addOption(new Option('--pin-dir <dir>', 'where its pins are').default(DEFAULT_PIN_DIR));
}

/** Parsed flags → what startAgent takes; a bad --workload is a usage error naming it. */
function agentOptions(v: AgentValues): AgentOptions {
  const placement: Placement = {
    locality: { region: v.region ?? '', zone: v.zone ?? '', subzone: v.subzone ?? '' },
    network: v.network ?? '',
    node: v.nodeId,
    cluster: v.cluster ?? '',
    labels: Object.fromEntries(v.label),
  };
  const workloads = v.workload.map((w) => parseWorkload(w, placement, v.cgroup));
  const optional = {
    graceMs: v.graceMs,
    metricsPort: v.metricsPort,
    metricsHost: v.metricsHost,
    logLevel: v.logLevel,
    maxServices: v.maxServices,
    maxNodes: v.maxNodes,
    maxEndpoints: v.maxEndpoints,
  };
  const set = Object.fromEntries(Object.entries(optional).filter(([, x]) => x !== undefined));
  const tls = v.caFile !== undefined || v.certFile !== undefined ? { tls: readClientTls(v) } : {};
  return {
    ...tls,
    server: v.server,
    nodeId: v.nodeId,
    placement,
    cgroup: v.cgroup,
    workloads,
    pinDir: v.pinDir,
    ...set,
  };
}

/** Parses the agent's flags alone (compose files and tests); a bad one throws, naming the flag. */
export function parseAgentArgs(args: readonly string[]): AgentOptions {
  const cmd = quiet(agentFlags(new Command('agent')));
  cmd.parse([...args], { from: 'user' });
  return agentOptions(cmd.opts<AgentValues>());
}

export function parseUninstallArgs(args: readonly string[]): { cgroup: string; pinDir: string } {
  const cmd = quiet(uninstallFlags(new Command('uninstall')));
  cmd.parse([...args], { from: 'user' });
  const v = cmd.opts<{ cgroup: string; pinDir: string }>();
  return { cgroup: path.resolve(v.cgroup), pinDir: v.pinDir };
}

/** Commander's own words and exit code for a missing mandatory option. */
function requireAgentFlags(cmd: Command, v: AgentValues): void {
  for (const name of REQUIRED) {
    if (v[name] !== undefined) continue;
    const flags = cmd.options.find((o) => o.attributeName() === name)?.flags ?? name;
    cmd.error(`error: required option '${flags}' not specified`, { code: 'commander.missingMandatoryOptionValue' });
  }
}

function quiet(cmd: Command): Command {
  return cmd.exitOverride().configureOutput({ writeErr: () => {}, writeOut: () => {} });
}

export function registerAgent(program: Command): void {
  const agent = agentFlags(
    program.command('agent').description('run the node agent (kernel datapath); `agent uninstall` removes it'),
    false,
  ).addHelpText('after', HELP_AFTER);
  // `agent uninstall --cgroup DIR`: the agent's own flags are read only before the subcommand.
  agent.enablePositionalOptions();
  agent.action(async (v: AgentValues, cmd: Command) => {
    requireAgentFlags(cmd, v);
    let opts: AgentOptions;
    try {
      opts = agentOptions(v);
    } catch (err) {
      if (err instanceof WorkloadSpecError) cmd.error(err.message, { exitCode: 2, code: 'canopy.workload' });
      throw err;
    }
    const { startAgent } = await import('../agent/agent.js');
    const running = await startAgent(opts);
    // On a signal the datapath keeps serving from the pinned maps; a new agent resumes it.
    await untilSignal(() => running.stop());
  });
  uninstallFlags(agent.command('uninstall').description('detach the program from --cgroup and remove the pins')).action(
    async (v: { cgroup: string; pinDir: string }) => {
      const { Datapath } = await import('../agent/datapath.js');
      for (const line of Datapath.uninstall({ cgroup: path.resolve(v.cgroup), pinDir: v.pinDir }))
        process.stdout.write(`${line}\n`);
    },
  );
}
