/**
 * The Envoy side of the compose demo, checked without Docker or Envoy:
 * - `docker-compose config -q` accepts the file (skips without docker-compose,
 *   fails in CI where .ci/run installs it);
 * - every Envoy bootstrap in deploy/envoy decodes against Envoy's Bootstrap
 *   proto with unknown fields rejected, passes the PGV walker, sends its node
 *   with a locality to Canopy over ADS (both replicas listed), its load reports
 *   there too (`cluster_manager.load_stats_config`), and keeps its
 *   admin off the network (compose.test.ts checks what is published);
 * - each sidecar's bootstrap and app agree with the compose mesh: the app's
 *   address is an endpoint of echo in the locality its sidecar declares.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { load as parse } from 'js-yaml';
import { parseConfig } from '../src/domain/spec.js';
import { packagePath } from '../src/platform/paths.js';
import { envoyType } from './support/envoy-protos.js';
import { pgvCheckBytes } from './support/pgv.js';
import { encodeProtoJson } from './support/proto-json.js';

type Obj = Record<string, unknown>;
const BOOTSTRAP = 'envoy.config.bootstrap.v3.Bootstrap';

function bootstraps(): string[] {
  const dir = packagePath('deploy', 'envoy');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => `${dir}/${f}`);
}

function decodeBootstrap(file: string): Obj {
  const { bytes, errors } = encodeProtoJson(envoyType(BOOTSTRAP), parse(readFileSync(file, 'utf8')));
  assert.deepEqual(errors, [], `${file} against ${BOOTSTRAP}`);
  assert.ok(bytes);
  assert.deepEqual(pgvCheckBytes(BOOTSTRAP, bytes), [], `${file}: PGV`);
  const t = envoyType(BOOTSTRAP);
  return t.toObject(t.decode(bytes), { enums: String, longs: Number, arrays: true }) as Obj;
}

describe('Envoy bootstraps', () => {
  const files = bootstraps();
  it('there are bootstraps for the demo', () => assert.ok(files.length >= 4));

  it('the strict decoder rejects an unknown field and an unknown Any type with their paths', () => {
    const type = envoyType(BOOTSTRAP);
    assert.deepEqual(
      encodeProtoJson(type, { node: { id: 'x', localty: {} } }).errors.map((e) => e.path),
      ['node.localty'],
    );
    const badAny = {
      static_resources: {
        listeners: [
          { name: 'l', listener_filters: [{ name: 'f', typed_config: { '@type': 'type.googleapis.com/no.Such' } }] },
        ],
      },
    };
    assert.deepEqual(
      encodeProtoJson(type, badAny).errors.map((e) => e.path),
      ['static_resources.listeners[0].listener_filters[0].typed_config.@type'],
    );
    assert.deepEqual(
      encodeProtoJson(type, { admin: { address: { socket_address: { protocol: 'SCTP' } } } }).errors.map((e) => e.path),
      ['admin.address.socket_address.protocol'],
    );
  });

  for (const file of files) {
    it(`${file.slice(file.lastIndexOf('/') + 1)}: decodes strictly, passes PGV, ADS to both canopy replicas with a located node`, () => {
      const b = decodeBootstrap(file);
      const node = b['node'] as Obj;
      const locality = node['locality'] as Obj;
      assert.ok(node['id'] && locality['region'] && locality['zone'], 'node id and locality');
      assert.equal((node['metadata'] as { fields: Obj }).fields['canopy.client_kind'] !== undefined, true);
      const ads = (b['dynamic_resources'] as Obj)['ads_config'] as Obj;
      assert.equal(ads['api_type'], 'DELTA_GRPC', 'delta ADS: LEDS needs it');
      const cluster = ((ads['grpc_services'] as Obj[])[0]!['envoy_grpc'] as Obj)['cluster_name'] as string;
      const statics = ((b['static_resources'] as Obj)['clusters'] as Obj[]).find((c) => c['name'] === cluster);
      assert.ok(statics, `the ADS cluster ${cluster} is defined`);
      const sock = (
        (((statics['load_assignment'] as Obj)['endpoints'] as Obj[])[0]!['lb_endpoints'] as Obj[])[0]![
          'endpoint'
        ] as Obj
      )['address'] as Obj;
      assert.deepEqual((sock['socket_address'] as Obj)['address'], 'canopy');
      const replicas = (((statics['load_assignment'] as Obj)['endpoints'] as Obj[])[0]!['lb_endpoints'] as Obj[]).map(
        (e) => (((e['endpoint'] as Obj)['address'] as Obj)['socket_address'] as Obj)['address'],
      );
      assert.deepEqual(replicas, ['canopy', 'canopy-2'], 'both Canopy replicas');
      // Load reports: Envoy opens StreamLoadStats only from the bootstrap (a Cluster's lrs_server is ignored).
      const lrs = (b['cluster_manager'] as Obj)['load_stats_config'] as Obj;
      assert.equal(lrs['api_type'], 'GRPC');
      assert.equal(((lrs['grpc_services'] as Obj[])[0]!['envoy_grpc'] as Obj)['cluster_name'], cluster);
      for (const k of ['cds_config', 'lds_config'])
        assert.ok(((b['dynamic_resources'] as Obj)[k] as Obj)['ads'], `${k} over ADS`);
      // The container's interfaces, for docker-compose.yml to publish on the host's loopback only (compose.test.ts).
      const admin = ((b['admin'] as Obj)['address'] as Obj)['socket_address'] as Obj;
      assert.ok(['127.0.0.1', '0.0.0.0'].includes(String(admin['address'])));
    });
  }
});

describe('docker-compose.yml with Envoy', () => {
  const root = packagePath();
  const compose = parse(readFileSync(`${root}/docker-compose.yml`, 'utf8')) as { services: Record<string, Obj> };

  it('passes docker-compose config', (t) => {
    const run = spawnSync('docker-compose', ['config', '-q'], { cwd: root, encoding: 'utf8' });
    if (run.error && (run.error as NodeJS.ErrnoException).code === 'ENOENT') {
      if (process.env['CI'] === 'true') assert.fail('docker-compose is missing in CI (.ci/run installs it)');
      return t.skip('docker-compose is not installed (apt-get install docker-compose)');
    }
    assert.equal(run.status, 0, run.stderr);
  });

  it("publishes every port on the host's 127.0.0.1 only, as docker-compose resolves the file", (t) => {
    const run = spawnSync('docker-compose', ['config'], { cwd: root, encoding: 'utf8' });
    if (run.error && (run.error as NodeJS.ErrnoException).code === 'ENOENT') {
      if (process.env['CI'] === 'true') assert.fail('docker-compose is missing in CI (.ci/run installs it)');
      return t.skip('docker-compose is not installed (apt-get install docker-compose)');
    }
    assert.equal(run.status, 0, run.stderr);
    const resolved = parse(run.stdout) as { services: Record<string, { ports?: (string | Obj)[] }> };
    let published = 0;
    for (const [name, svc] of Object.entries(resolved.services)) {
      for (const p of svc.ports ?? []) {
        // Short form `IP:HOST:CONTAINER[/proto]`, or the long form docker-compose writes for one without an IP.
        const ip = typeof p === 'string' ? (p.split(':').length === 3 ? p.split(':')[0] : undefined) : p['host_ip'];
        assert.equal(ip, '127.0.0.1', `${name}: ${JSON.stringify(p)} is published beyond the host's loopback`);
        published++;
      }
    }
    assert.ok(published >= 8, `the canopy, agent and Envoy ports (${published})`);
  });

  it("each app has a sidecar in its network namespace whose node locality is the app endpoint's", () => {
    const mesh = parseConfig(parse(readFileSync(`${root}/deploy/compose/mesh.yaml`, 'utf8')));
    assert.ok(mesh.ok);
    const echo = mesh.value.services.find((s) => s.name === 'echo')!;
    const apps = Object.keys(compose.services).filter((n) => compose.services[`${n}-sidecar`] && n !== 'client');
    assert.equal(apps.length, 3, 'three apps with sidecars');
    const regions = new Set<string>();
    for (const app of apps) {
      const sidecar = compose.services[`${app}-sidecar`]!;
      assert.equal(sidecar['network_mode'], `service:${app}`);
      const mount = (sidecar['volumes'] as string[])[0]!.split(':')[0]!;
      const node = decodeBootstrap(`${root}/${mount.slice(2)}`)['node'] as Obj;
      const address = ((compose.services[app]!['networks'] as Obj)['default'] as Obj)['ipv4_address'];
      const endpoint = echo.endpoints.find((e) => e.address === address);
      assert.ok(endpoint, `${app}'s address ${String(address)} is an echo endpoint`);
      const l = node['locality'] as Obj;
      assert.deepEqual(
        [l['region'], l['zone'], l['sub_zone']],
        [endpoint.locality.region, endpoint.locality.zone, endpoint.locality.subzone],
      );
      regions.add(endpoint.locality.region);
    }
    assert.equal(regions.size, 3, 'three localities');
    const client = compose.services['client']!;
    assert.equal(client['network_mode'], 'service:client-sidecar');
    const target = (client['command'] as string[])[(client['command'] as string[]).indexOf('--target') + 1];
    assert.equal(target, `127.0.0.1:${echo.outboundPort}`, 'the client calls echo through its sidecar');
  });
});
