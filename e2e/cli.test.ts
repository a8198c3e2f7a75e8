/**
 * The `canopy` command as an operator types it: the real CLI in a child process, against a real
 * `canopy serve` on loopback and a real ADS client.
 * - --version; every subcommand's --help lists its flags and exits 0; an unknown command or flag
 *   is named and exits 2, in every subcommand;
 * - serve: a port in use is named with its flag and nothing is written; a bad --log-level lists the
 *   valid ones; a store that keeps API changes over an unchanged config file says so at start;
 * - get, apply [--dry-run], proxy-status, validate, bootstrap, completion, and explain against a
 *   server that is down.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { load } from 'js-yaml';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { RawAdsStream } from './support/raw-ads.js';

const CLI = fileURLToPath(new URL('../server/src/cli/canopy.js', import.meta.url));
const PKG = JSON.parse(readFileSync(fileURLToPath(new URL('../../package.json', import.meta.url)), 'utf8')) as {
  version: string;
};

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the CLI and waits for it (async, so that a server in this process keeps answering). */
function canopy(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

/** Each subcommand with the arguments it needs to get past its required ones. */
const SUBCOMMANDS: Record<string, string[]> = {
  serve: ['--config', 'x.yaml'],
  get: ['services'],
  apply: ['-f', 'x.yaml'],
  'proxy-status': [],
  validate: ['x.yaml'],
  bootstrap: ['grpc', '--node-id', 'n'],
  explain: ['--service', 's', '--config', 'x.yaml'],
  import: ['istio', 'x.yaml'],
  agent: ['--server', '127.0.0.1:1', '--node-id', 'n', '--cgroup', '/tmp'],
  health: ['echo', '10.0.0.1:80', 'healthy'],
  demo: [],
  'demo-app': ['--id', 'a'],
  'demo-call': ['--target', '127.0.0.1:1'],
  completion: ['bash'],
  schema: [],
};

describe('canopy: usage, help and exit codes', () => {
  it('--version prints the package version and exits 0', async () => {
    const r = await canopy(['--version']);
    assert.equal(r.status, 0);
    assert.equal(r.stdout.trim(), PKG.version);
  });

  it('--help lists every subcommand and exits 0', async () => {
    const r = await canopy(['--help']);
    assert.equal(r.status, 0);
    for (const sub of Object.keys(SUBCOMMANDS)) assert.match(r.stdout, new RegExp(`\\n  ${sub}\\b`), sub);
  });

  it('an unknown command is named, with a suggestion, and exits 2', async () => {
    const r = await canopy(['serv']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /unknown command 'serv'/);
    assert.match(r.stderr, /Did you mean serve\?/);
  });

  for (const sub of Object.keys(SUBCOMMANDS)) {
    it(`${sub} --help lists its flags and exits 0; an unknown flag is named and exits 2`, async () => {
      const [help, bad] = await Promise.all([
        canopy([sub, '--help']),
        canopy([sub, ...SUBCOMMANDS[sub]!, '--no-such-flag']),
      ]);
      assert.equal(help.status, 0, help.stderr);
      assert.match(help.stdout, new RegExp(`canopy ${sub}`, 'i'));
      for (const flag of SUBCOMMANDS[sub]!.filter((a) => a.startsWith('--')))
        assert.ok(help.stdout.includes(flag), `${sub} --help lists ${flag}`);
      assert.equal(bad.status, 2, `${sub}: ${bad.stderr}`);
      assert.match(bad.stderr, /--no-such-flag/);
    });
  }

  it('serve --help shows defaults and env variables', async () => {
    const r = await canopy(['serve', '--help']);
    assert.match(r.stdout, /--data-dir <dir>[\s\S]*default: "canopy-data"/);
    assert.match(r.stdout, /CANOPY_XDS_PORT/);
    assert.match(r.stdout, /--admin-token-file/);
  });

  it('an unknown --log-level lists the valid ones and exits 2', async () => {
    const r = await canopy(['serve', '--config', 'x.yaml', '--log-level', 'loud']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /'loud' is invalid.*fatal, error, warn, info, debug, trace, silent/);
    const env = await canopy(['serve', '--config', 'x.yaml'], { CANOPY_LOG_LEVEL: 'loud' });
    assert.equal(env.status, 2);
    assert.match(env.stderr, /CANOPY_LOG_LEVEL|'loud'/);
  });

  it('a bad port value names the flag and exits 2', async () => {
    const r = await canopy(['serve', '--config', 'x.yaml', '--xds-port', '99999']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--xds-port <n>.*'99999' is invalid/);
  });
});

describe('canopy: operator commands against a running server', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-cli-'));
  const mesh = {
    services: [
      {
        name: 'echo',
        port: 50051,
        endpoints: [
          { address: '10.0.0.10', port: 80, locality: { region: 'r1', zone: 'z1' } },
          { address: '10.0.0.2', port: 80, locality: { region: 'r1', zone: 'z2' } },
          { address: '10.0.0.19', port: 80, locality: { region: 'r2', zone: 'z1' } },
        ],
      },
    ],
  };
  let server: CanopyProcess;
  let admin: string[];
  before(async () => {
    server = await startCanopyProcess(mesh, ['--data-dir', path.join(dir, 'data')]);
    admin = ['--admin', server.adminUrl];
  });
  after(async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('get services / endpoints (numeric address order) as table, json and yaml', async () => {
    const services = await canopy(['get', 'services', ...admin]);
    assert.equal(services.status, 0, services.stderr);
    assert.match(services.stdout, /^NAME\s+ENDPOINTS\s+HEALTHY/);
    assert.match(services.stdout, /\necho\s+3\s+3\s+failover\s+50051/);
    const table = await canopy(['get', 'endpoints', ...admin]);
    const order = table.stdout
      .split('\n')
      .slice(1, 4)
      .map((l) => l.split(/\s+/)[1]);
    assert.deepEqual(order, ['10.0.0.2', '10.0.0.10', '10.0.0.19']);
    const json = JSON.parse((await canopy(['get', 'endpoints', '-o', 'json', ...admin])).stdout) as {
      endpoints: { address: string; service: string }[];
    };
    assert.deepEqual(
      json.endpoints.map((e) => e.address),
      ['10.0.0.2', '10.0.0.10', '10.0.0.19'],
    );
    const yaml = load((await canopy(['get', 'services', '-o', 'yaml', ...admin])).stdout) as {
      services: { name: string }[];
    };
    assert.equal(yaml.services[0]!.name, 'echo');
    const none = await canopy(['get', 'endpoints', '--service', 'nope', ...admin]);
    assert.equal(none.status, 1);
    assert.match(none.stderr, /no service "nope"/);
  });

  it('get clients and proxy-status show a connected client, SYNCED once it ACKs, NACKED after a NACK', async () => {
    const stream = new RawAdsStream(server.xdsUri);
    const node = { id: 'cli-node-1', cluster: 'app', locality: { region: 'r1', zone: 'z1', sub_zone: '' } };
    const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
    const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
    try {
      stream.send({ node, type_url: CDS, resource_names: ['echo'] });
      const cds = await stream.next(5000);
      stream.send({
        type_url: CDS,
        resource_names: ['echo'],
        version_info: cds.version_info,
        response_nonce: cds.nonce,
      });
      stream.send({ type_url: EDS, resource_names: ['echo'] });
      const eds = await stream.next(5000);
      stream.send({
        type_url: EDS,
        resource_names: ['echo'],
        version_info: '',
        response_nonce: eds.nonce,
        error_detail: { code: 3, message: 'rejected by the test' },
      });
      await new Promise((r) => setTimeout(r, 300));
      const clients = await canopy(['get', 'clients', ...admin]);
      assert.equal(clients.status, 0, clients.stderr);
      assert.match(clients.stdout, /cli-node-1\s+sotw\s+r1\/z1/);
      const ps = await canopy(['proxy-status', '--xds', server.xdsUri]);
      assert.equal(ps.status, 0, ps.stderr);
      assert.match(ps.stdout, /^NODE\s+CLUSTER\s+LOCALITY\s+LDS\s+RDS\s+CDS\s+EDS/);
      assert.match(ps.stdout, /\ncli-node-1\s+app\s+r1\/z1\s+-\s+-\s+SYNCED\s+NACKED/);
      const json = JSON.parse((await canopy(['proxy-status', '--xds', server.xdsUri, '-o', 'json'])).stdout) as {
        proxies: { node: string; types: Record<string, string> }[];
      };
      assert.deepEqual(json.proxies.find((p) => p.node === 'cli-node-1')?.types['CDS'], 'SYNCED');
    } finally {
      stream.close();
    }
  });

  it('proxy-status against a port with no server says where and why, exit 1', async () => {
    const port = await freePort();
    const r = await canopy(['proxy-status', '--xds', `127.0.0.1:${port}`]);
    assert.equal(r.status, 1);
    assert.match(r.stderr, new RegExp(`CSDS\\) from 127\\.0\\.0\\.1:${port}`));
  });

  it('apply --dry-run prints the diff and changes nothing; apply makes it so; then unchanged', async () => {
    const file = path.join(dir, 'apply.yaml');
    const next = structuredClone(mesh);
    next.services[0]!.endpoints[0] = { address: '10.0.0.11', port: 80, locality: { region: 'r1', zone: 'z1' } };
    (next.services[0]!.endpoints[1] as { weight?: number }).weight = 5;
    writeFileSync(file, JSON.stringify(next));
    const dry = await canopy(['apply', '-f', file, '--dry-run', ...admin]);
    assert.equal(dry.status, 0, dry.stderr);
    assert.match(dry.stdout, /service\/echo configured \(dry run\)/);
    assert.match(dry.stdout, /\+ 10\.0\.0\.11:80/);
    assert.match(dry.stdout, /- 10\.0\.0\.10:80/);
    assert.match(dry.stdout, /~ 10\.0\.0\.2:80 weight: 1 → 5/);
    const still = (await server.admin('GET', '/api/v1/services/echo')).body as { endpoints: { address: string }[] };
    assert.ok(
      still.endpoints.some((e) => e.address === '10.0.0.10'),
      'dry run wrote nothing',
    );
    const real = await canopy(['apply', '-f', file, ...admin]);
    assert.equal(real.status, 0, real.stderr);
    assert.match(real.stdout, /service\/echo configured\n/);
    const now = (await server.admin('GET', '/api/v1/services/echo')).body as { endpoints: { address: string }[] };
    assert.ok(now.endpoints.some((e) => e.address === '10.0.0.11'));
    const again = await canopy(['apply', '-f', file, ...admin]);
    assert.match(again.stdout, /service\/echo unchanged/);
  });

  it('apply --dry-run is validated by the server: a conflict only the running mesh shows is refused, nothing written', async () => {
    // On its own the file is valid; next to the running echo (port 50051) a TCP service without a VIP on that port
    // could not be told apart by a sidecar's listener, which only the server can see.
    const file = path.join(dir, 'conflict.yaml');
    const raw = { name: 'raw', port: 50051, protocol: 'tcp', endpoints: [{ address: '10.0.0.40', port: 9 }] };
    writeFileSync(file, JSON.stringify({ services: [raw] }));
    assert.equal((await canopy(['validate', file])).status, 0);
    const dry = await canopy(['apply', '-f', file, '--dry-run', ...admin]);
    assert.equal(dry.status, 1, dry.stdout);
    assert.match(dry.stderr, /service\/raw rejected \(400\)/);
    assert.equal((await server.admin('GET', '/api/v1/services/raw')).status, 404, 'the dry run wrote nothing');
  });

  it('apply and validate report an invalid file with field paths, exit 1', async () => {
    const bad = path.join(dir, 'bad.yaml');
    writeFileSync(bad, 'services:\n  - name: echo\n    endpoints:\n      - { address: 10.0.0.300, port: 80 }\n');
    const apply = await canopy(['apply', '-f', bad, ...admin]);
    assert.equal(apply.status, 1);
    assert.match(apply.stderr, /services\[0\]\.endpoints\[0\]\.address/);
    assert.match(apply.stderr, /nothing applied/, 'refused before the server: says nothing was applied');
    const validate = await canopy(['validate', bad]);
    assert.equal(validate.status, 1);
    assert.match(validate.stderr, /services\[0\]\.endpoints\[0\]\.address/);
    const good = path.join(dir, 'good.json');
    writeFileSync(good, JSON.stringify(mesh));
    const ok = await canopy(['validate', good]);
    assert.equal(ok.status, 0, ok.stderr);
    assert.match(ok.stdout, /valid \(1 service\(s\), 3 endpoint\(s\)\)/);
  });

  it('a port in use is named with its flag and env, exit 1, and the data directory is not created', async () => {
    const port = Number(server.xdsUri.split(':').pop());
    const file = path.join(dir, 'good.json');
    writeFileSync(file, JSON.stringify(mesh));
    const data = path.join(dir, 'never');
    const r = await canopy([
      'serve',
      '--config',
      file,
      '--data-dir',
      data,
      '--xds-port',
      String(port),
      '--admin-port',
      '0',
    ]);
    assert.equal(r.status, 1);
    assert.match(
      r.stderr,
      new RegExp(`xDS port ${port} on 127\\.0\\.0\\.1 is in use \\(--xds-port, CANOPY_XDS_PORT\\)`),
    );
    assert.equal(existsSync(data), false, 'nothing was written');
    const adminPort = Number(new URL(server.adminUrl).port);
    const r2 = await canopy(['serve', '--config', file, '--data-dir', data, '--xds-port', '0'], {
      CANOPY_ADMIN_PORT: String(adminPort),
    });
    assert.equal(r2.status, 1);
    assert.match(
      r2.stderr,
      new RegExp(`admin port ${adminPort} on 127\\.0\\.0\\.1 is in use \\(--admin-port, CANOPY_ADMIN_PORT\\)`),
    );
  });

  it('explain against a server that is down names the URL and why, exit 1', async () => {
    const port = await freePort();
    const r = await canopy(['explain', '--admin', `http://127.0.0.1:${port}`, '--service', 'echo']);
    assert.equal(r.status, 1);
    assert.match(
      r.stderr,
      new RegExp(`cannot reach the Canopy admin API at http://127\\.0\\.0\\.1:${port}/debug/explain`),
    );
    assert.match(r.stderr, /ECONNREFUSED/);
    const get = await canopy(['get', 'services', '--admin', `http://127.0.0.1:${port}`]);
    assert.equal(get.status, 1);
    assert.match(get.stderr, /ECONNREFUSED/);
  });
});

describe('canopy serve: API changes kept over an unchanged config file', () => {
  it('says at startup how many endpoints and which services the store overrides', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-cli-keep-'));
    const data = ['--data-dir', path.join(dir, 'data')];
    const mesh = {
      services: [
        {
          name: 'a',
          endpoints: [
            { address: '10.0.0.1', port: 80 },
            { address: '10.0.0.2', port: 80 },
          ],
        },
        { name: 'b', endpoints: [{ address: '10.0.1.1', port: 80 }] },
      ],
    };
    try {
      const first = await startCanopyProcess(mesh, data);
      assert.ok(!first.logs().join('\n').includes('keeps API changes'), 'a fresh store overrides nothing');
      for (const ep of ['10.0.0.1%3A80', '10.0.0.2%3A80'])
        assert.equal(
          (await first.admin('PATCH', `/api/v1/services/a/endpoints/${ep}`, { health: 'unhealthy' })).status,
          200,
        );
      await first.stop();
      const second = await startCanopyProcess(mesh, data);
      // The note follows ready: a restart that found the unchanged file in the store reads it again only for this.
      const until = Date.now() + 20_000;
      while (!second.logs().join('\n').includes('keeps API changes') && Date.now() < until)
        await new Promise((r) => setTimeout(r, 50));
      await second.stop();
      const logs = second.logs().join('\n');
      assert.match(logs, /keeps API changes over the unchanged config file: 2 endpoint\(s\) in 1 service\(s\): a\./);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('canopy bootstrap and completion', () => {
  it('bootstrap grpc writes the GRPC_XDS_BOOTSTRAP JSON for a node and locality, to a file with -O', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-cli-boot-'));
    try {
      const out = path.join(dir, 'bootstrap.json');
      const args = ['--node-id', 'app-1', '--region', 'r1', '--zone', 'z1', '--xds', '10.1.2.3:18000'];
      const r = await canopy(['bootstrap', 'grpc', ...args, '-O', out]);
      assert.equal(r.status, 0, r.stderr);
      const b = JSON.parse(readFileSync(out, 'utf8')) as { xds_servers: { server_uri: string }[]; node: object };
      assert.equal(b.xds_servers[0]!.server_uri, '10.1.2.3:18000');
      assert.deepEqual(b.node, { id: 'app-1', cluster: 'app', locality: { region: 'r1', zone: 'z1', sub_zone: '' } });
      const envoy = load(
        (await canopy(['bootstrap', 'envoy', ...args.slice(0, 6), '--xds', 'canopy.mesh:18000'])).stdout,
      ) as {
        static_resources: { clusters: { type: string }[] };
      };
      assert.equal(envoy.static_resources.clusters[0]!.type, 'STRICT_DNS', 'a DNS name is resolved by Envoy');
      const bad = await canopy(['bootstrap', 'grpc', '--node-id', 'n', '--xds', 'nohostport']);
      assert.equal(bad.status, 2);
      assert.match(bad.stderr, /--xds must be HOST:PORT/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('completion bash is valid bash that completes subcommands and their flags', async (t) => {
    const r = await canopy(['completion', 'bash']);
    assert.equal(r.status, 0);
    const bash = spawnSync(
      'bash',
      [
        '-c',
        `${r.stdout}\nCOMP_WORDS=(canopy pro); COMP_CWORD=1; _canopy; echo "\${COMPREPLY[@]}"; COMP_WORDS=(canopy get --ou); COMP_CWORD=2; _canopy; echo "\${COMPREPLY[@]}"`,
      ],
      {
        encoding: 'utf8',
      },
    );
    if (bash.error) return t.skip('bash is not installed');
    assert.equal(bash.status, 0, bash.stderr);
    assert.deepEqual(bash.stdout.trim().split('\n'), ['proxy-status', '--output']);
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}
