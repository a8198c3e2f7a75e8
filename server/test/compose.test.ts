/**
 * docker-compose.yml cannot run without a Docker engine, so it is checked
 * statically: every build file and mounted file exists, mounted Canopy
 * configs are valid, and published ports match what the server listens on.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { load as parse } from 'js-yaml';
import { parseAgentArgs } from '../src/agent/cli-agent.js';
import { parseConfig } from '../src/domain/spec.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

interface ComposeService {
  build?: { context: string; dockerfile: string };
  privileged?: boolean;
  cgroup?: string;
  depends_on?: Record<string, { condition: string }>;
  image?: string;
  command?: string[];
  volumes?: string[];
  ports?: string[];
}

describe('docker-compose.yml', () => {
  const compose = parse(readFileSync(`${root}docker-compose.yml`, 'utf8')) as { services: Record<string, ComposeService> };

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
    const config = parse(readFileSync(`${root}server/examples/mesh.yaml`, 'utf8')) as { server: { xdsPort: number; adminPort: number } };
    const published = (canopy?.ports ?? []).map((p) => Number(p.split(':')[1]));
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
    assert.ok((agent.volumes ?? []).some((v) => v.startsWith('/sys/fs/cgroup:')), 'the agent attaches to the host cgroup tree');
    assert.ok((agent.volumes ?? []).some((v) => v.startsWith('/sys/fs/bpf:')), 'bpffs is mounted so pins outlive the container');
    const opts = parseAgentArgs(agent.command ?? []);
    const config = parse(readFileSync(`${root}server/examples/mesh.yaml`, 'utf8')) as { server: { xdsPort: number } };
    assert.equal(opts.server, `canopy:${config.server.xdsPort}`);
    assert.ok(agent.depends_on?.['canopy'], 'starts after canopy');
    const published = (agent.ports ?? []).map((p) => Number(p.split(':')[1]));
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
    const published = replicas.flatMap((r) => (r?.ports ?? []).map((p) => p.split(':')[0]));
    assert.equal(new Set(published).size, published.length, 'no host port published twice');
  });

  it('the example mesh gives the agent something to intercept (an IPv4 VIP and a port)', () => {
    const config = parseConfig(parse(readFileSync(`${root}server/examples/mesh.yaml`, 'utf8')));
    assert.ok(config.ok);
    assert.ok(config.value.services.some((s) => s.vip !== undefined && s.port !== undefined && /^\d+\.\d+\.\d+\.\d+$/.test(s.vip)));
  });
});
