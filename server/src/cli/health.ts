/**
 * `canopy health SERVICE ENDPOINT… STATE` and `canopy health SERVICE --locality R[/Z[/S]] STATE`: the
 * commonest write, marking endpoints (or every endpoint of a locality) unhealthy, draining or healthy
 * again, in one admin API request (one store write) without curl.
 */
import { Option, type Command } from 'commander';
import { endpointKey, HEALTH_VALUES, type Health } from '../domain/service.js';
import { parseEndpointKey } from '../domain/spec.js';
import { adminJson } from './admin-client.js';
import { adminOptions, CliError, EXIT_USAGE, serverError, type AdminTarget } from './common.js';

interface EndpointJson {
  address: string;
  port: number;
  health?: Health;
  locality?: { region?: string; zone?: string; subzone?: string };
}

type Options = AdminTarget & { locality?: string };

export function registerHealth(program: Command): void {
  const cmd = program
    .command('health')
    .description('mark endpoints, or a whole locality, unhealthy, draining or healthy again')
    .usage(`SERVICE (ENDPOINT... | --locality R[/Z[/S]]) ${HEALTH_VALUES.join('|')} [options]`)
    .argument('<service>', 'the service')
    .argument('<endpoint-or-state...>', 'endpoints as ADDRESS:PORT ([IPv6]:PORT), then the state')
    .addOption(
      new Option(
        '-l, --locality <path>',
        'every endpoint of this locality: region, region/zone or region/zone/subzone',
      ),
    );
  for (const o of adminOptions()) cmd.addOption(o);
  cmd.addHelpText(
    'after',
    '\nExamples:\n  canopy health echo 10.0.0.11:50051 unhealthy\n  canopy health echo --locality us-east/us-east-1a draining',
  );
  cmd.action(async (service: string, rest: string[], opts: Options) => {
    const { keys, state } = readTargets(rest, opts.locality);
    const path = `/api/v1/services/${encodeURIComponent(service)}`;
    const got = await adminJson<{ endpoints: EndpointJson[] }>(opts, path);
    if (got.status !== 200) throw new CliError(`GET ${path}: ${got.status} ${serverError(got.body)}`);
    const chosen = choose(got.body.endpoints, keys, opts.locality, service);
    const changed = chosen.filter((e) => (e.health ?? 'healthy') !== state);
    if (changed.length > 0) {
      const patch = await adminJson(opts, `${path}/endpoints`, {
        method: 'PATCH',
        body: JSON.stringify({ patch: changed.map((e) => ({ endpoint: endpointKey(e), health: state })) }),
        headers: { 'content-type': 'application/json' },
      });
      if (patch.status !== 200)
        throw new CliError(`PATCH ${path}/endpoints: ${patch.status} ${serverError(patch.body)}`);
    }
    for (const e of chosen) {
      const was = e.health ?? 'healthy';
      process.stdout.write(
        `${service}/${endpointKey(e)} ${was === state ? `${state} (unchanged)` : `${was} → ${state}`}\n`,
      );
    }
  });
}

/** The endpoint keys and the state from the positional arguments; a usage error names what is wrong. */
function readTargets(rest: readonly string[], locality: string | undefined): { keys: string[]; state: Health } {
  const state = rest.at(-1)!;
  if (!(HEALTH_VALUES as readonly string[]).includes(state))
    throw new CliError(
      `health: the last argument is the state (${HEALTH_VALUES.join(', ')}), got "${state}"`,
      EXIT_USAGE,
    );
  const given = rest.slice(0, -1);
  if ((given.length === 0) === (locality === undefined))
    throw new CliError('health: give the endpoints (ADDRESS:PORT ...) or --locality R[/Z[/S]], not both', EXIT_USAGE);
  const keys = given.map((text) => {
    const key = parseEndpointKey(text);
    if (key === undefined)
      throw new CliError(`health: "${text}" is not an endpoint: give ADDRESS:PORT ([IPv6]:PORT)`, EXIT_USAGE);
    return key;
  });
  if (locality !== undefined && (locality === '' || locality.split('/').length > 3 || locality.split('/').includes('')))
    throw new CliError(
      `health: --locality "${locality}" must be region, region/zone or region/zone/subzone`,
      EXIT_USAGE,
    );
  return { keys, state: state as Health };
}

/** The service's endpoints the command names; one it does not have is an error before anything is written. */
function choose(
  endpoints: readonly EndpointJson[],
  keys: readonly string[],
  locality: string | undefined,
  service: string,
): EndpointJson[] {
  if (locality !== undefined) {
    const want = locality.split('/');
    const chosen = endpoints.filter((e) => {
      const have = [e.locality?.region ?? '', e.locality?.zone ?? '', e.locality?.subzone ?? ''];
      return want.every((v, i) => have[i] === v);
    });
    if (chosen.length === 0) throw new CliError(`service "${service}" has no endpoint in locality ${locality}`);
    return chosen;
  }
  const byKey = new Map(endpoints.map((e) => [endpointKey(e), e]));
  const missing = keys.filter((k) => !byKey.has(k));
  if (missing.length > 0) throw new CliError(`service "${service}" has no endpoint ${missing.join(', ')}`);
  return [...new Set(keys)].map((k) => byKey.get(k)!);
}
