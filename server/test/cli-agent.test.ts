import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { kernelTooOld } from '../src/agent/bpf.js';
import { parseAgentArgs, parseUninstallArgs } from '../src/cli/agent.js';

const base = ['--server', '127.0.0.1:18000', '--node-id', 'n1', '--cgroup', '/cg'];

describe('canopy agent flags', () => {
  it('builds the node placement and per-cgroup workloads from flags', () => {
    const o = parseAgentArgs([
      ...base,
      '--region',
      'r1',
      '--zone',
      'z1',
      '--subzone',
      's1',
      '--label',
      'app=web',
      '--label',
      'tier=1',
      '--workload',
      'east=region=r2,app=api',
      '--workload',
      '/abs/batch=label:team=data,subzone=s9',
      '--grace-ms',
      '50',
      '--metrics-port',
      '0',
    ]);
    assert.deepEqual(o.placement, {
      locality: { region: 'r1', zone: 'z1', subzone: 's1' },
      network: '',
      node: 'n1',
      cluster: '',
      labels: { app: 'web', tier: '1' },
    });
    assert.equal(o.workloads?.length, 2);
    const [east, batch] = o.workloads!;
    assert.equal(east!.cgroup, path.join('/cg', 'east'), 'a relative workload cgroup is under --cgroup');
    assert.deepEqual(
      east!.placement.locality,
      { region: 'r2', zone: 'z1', subzone: 's1' },
      'unset keys inherit the node',
    );
    assert.deepEqual(east!.placement.labels, { app: 'api', tier: '1' });
    assert.equal(batch!.cgroup, '/abs/batch');
    assert.deepEqual(batch!.placement.labels, { app: 'web', tier: '1', team: 'data' });
    assert.equal(batch!.placement.locality.subzone, 's9');
    assert.equal(o.graceMs, 50);
    assert.equal(o.metricsPort, 0);
  });

  it('names the flag at fault', () => {
    // Commander's words, each naming the flag (the CLI prints them as `canopy: ...` and exits 2).
    const cases: [string[], RegExp][] = [
      [['--node-id', 'n', '--cgroup', '/cg'], /required option '--server <host:port>' not specified/],
      [
        ['--server', 'nohost', '--node-id', 'n', '--cgroup', '/cg'],
        /'--server <host:port>' argument 'nohost' is invalid\. must be HOST:PORT/,
      ],
      [['--server', 'h:1', '--cgroup', '/cg'], /required option '--node-id <id>' not specified/],
      [['--server', 'h:1', '--node-id', 'n'], /required option '--cgroup <dir>' not specified/],
      [
        [...base, '--label', 'novalue'],
        /'--label <key=value>' argument 'novalue' is invalid\. --label "novalue" must be key=value/,
      ],
      [[...base, '--workload', 'east'], /--workload "east" must be CGROUP=k=v/],
      [[...base, '--workload', 'east=region'], /--workload east: "region" must be key=value/],
      [[...base, '--grace-ms=-1'], /'--grace-ms <n>' argument '-1' is invalid\. must be an integer in 0\.\.600000/],
      [
        [...base, '--metrics-port', '70000'],
        /'--metrics-port <n>' argument '70000' is invalid\. must be an integer in 0\.\.65535/,
      ],
      [[...base, '--bogus'], /unknown option '--bogus'/],
      [
        [...base, '--max-services', '0'],
        /'--max-services <n>' argument '0' is invalid\. must be an integer in 1\.\.16777216/,
      ],
      [[...base, '--max-endpoints', 'x'], /'--max-endpoints <n>' argument 'x' is invalid\. must be an integer/],
    ];
    for (const [args, re] of cases) assert.throws(() => parseAgentArgs(args), re, args.join(' '));
  });

  it('reads the map sizes', () => {
    const o = parseAgentArgs([...base, '--max-services', '8', '--max-nodes', '64', '--max-endpoints', '1024']);
    assert.deepEqual([o.maxServices, o.maxNodes, o.maxEndpoints], [8, 64, 1024]);
  });

  it('reads uninstall flags', () => {
    assert.deepEqual(parseUninstallArgs(['--cgroup', '/cg', '--pin-dir', '/p']), { cgroup: '/cg', pinDir: '/p' });
    assert.throws(() => parseUninstallArgs([]), /required option '--cgroup <dir>' not specified/);
  });
});

describe('kernel version check', () => {
  it('accepts 5.14 and newer, and says why an older one will not do', () => {
    for (const r of ['5.14.0', '5.15.0-91-generic', '6.1.0-13-amd64', '6.18.44-fc', 'weird'])
      assert.equal(kernelTooOld(r), undefined, r);
    assert.match(
      kernelTooOld('5.10.0-26-amd64')!,
      /kernel 5\.10\.0-26-amd64 is too old for the datapath: Linux 5\.14 or newer is required/,
    );
    assert.ok(kernelTooOld('4.19.0'));
  });
});

describe('--help', () => {
  const cli = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'src', 'cli', 'canopy.js');
  for (const args of [['--help'], ['serve', '--help'], ['agent', '--help'], ['agent', 'uninstall', '--help']]) {
    it(`canopy ${args.join(' ')} prints usage and exits 0`, () => {
      const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 10_000 });
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /usage:/i);
      assert.match(
        r.stdout,
        args[0] === 'agent' ? /canopy agent uninstall/ : args[0] === 'serve' ? /--config <file>/ : /serve \[options\]/,
      );
    });
  }
});
