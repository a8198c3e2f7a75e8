/**
 * The command line's one grammar (issue 33, section 2), through the real `canopy` in a child process
 * against real `canopy serve`s on loopback (one open, one behind an admin token):
 * - --admin takes a URL or HOST:PORT; anything else exits 2 naming --admin (or CANOPY_ADMIN_URL);
 * - explain, health and get take --token-file and CANOPY_ADMIN_TOKEN; explain and import take -o;
 * - canopy health marks endpoints and localities unhealthy, draining and healthy again;
 * - apply -f - and import … - read standard input; validate caps its list with a count of the rest;
 * - bootstrap refuses an empty --node-id and names an -O path it cannot write;
 * - the README's `$schema` line resolves next to a config written anywhere, with `canopy schema -O`;
 * - bash completion completes nested subcommands and flag values;
 * - serve logs JSON off a terminal, pino-pretty lines with --log-format pretty (and in a terminal,
 *   through script(1) when it is installed), and prints the web view's URL when ready.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { Ajv } from 'ajv';
import { load } from 'js-yaml';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';

const CLI = fileURLToPath(new URL('../server/src/cli/canopy.js', import.meta.url));

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

function canopy(
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; input?: string; untilMs?: number } = {},
): Promise<Run> {
  return new Promise((resolve) => {
    const env = { ...process.env, CANOPY_ADMIN_URL: undefined, CANOPY_ADMIN_TOKEN: undefined, ...opts.env };
    const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdin.end(opts.input ?? '');
    const timer = setTimeout(() => child.kill(opts.untilMs ? 'SIGTERM' : 'SIGKILL'), opts.untilMs ?? 20_000);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

const MESH = {
  services: [
    {
      name: 'echo',
      endpoints: [
        { address: '10.0.0.1', port: 80, locality: { region: 'r1', zone: 'z1' } },
        { address: '10.0.0.2', port: 80, locality: { region: 'r1', zone: 'z1' } },
        { address: '10.0.0.3', port: 80, locality: { region: 'r2', zone: 'z1' } },
      ],
    },
  ],
};

describe('canopy: one grammar', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-grammar-'));
  const tokenFile = path.join(dir, 'token');
  let open: CanopyProcess;
  let locked: CanopyProcess;
  before(async () => {
    writeFileSync(tokenFile, 's3cret-token-of-32-characters-xx\n');
    [open, locked] = await Promise.all([
      startCanopyProcess(MESH, ['--data-dir', path.join(dir, 'd1')]),
      startCanopyProcess(MESH, ['--data-dir', path.join(dir, 'd2'), '--admin-token-file', tokenFile]),
    ]);
  });
  after(async () => {
    await Promise.all([open?.stop(), locked?.stop()]);
    rmSync(dir, { recursive: true, force: true });
  });
  const hostPort = () => new URL(open.adminUrl).host;
  const healthOf = async (server: CanopyProcess) =>
    (
      (await server.admin('GET', '/api/v1/services/echo')).body as { endpoints: { address: string; health: string }[] }
    ).endpoints.map((e) => `${e.address}=${e.health ?? 'healthy'}`);

  it('--admin takes HOST:PORT as http://HOST:PORT; a value that is no URL exits 2 naming the flag', async () => {
    const ok = await canopy(['get', 'services', '--admin', hostPort()]);
    assert.equal(ok.status, 0, ok.stderr);
    assert.match(ok.stdout, /^NAME/);
    for (const bad of ['http://', 'ftp://127.0.0.1:1', 'user@', '127.0.0.1:99999', 'ht!tp://x y', 'a b:80', 'h/x']) {
      const r = await canopy(['get', 'services', '--admin', bad]);
      assert.equal(r.status, 2, `${bad}: ${r.stderr}`);
      assert.match(r.stderr, /--admin <url>/);
      assert.match(r.stderr, /not a valid URL: expected http\[s\]:\/\/HOST:PORT/);
    }
    const env = await canopy(['explain', '--service', 'echo'], { env: { CANOPY_ADMIN_URL: 'not a url' } });
    assert.equal(env.status, 2, env.stderr);
    assert.match(env.stderr, /CANOPY_ADMIN_URL/);
  });

  it('the token from --token-file or CANOPY_ADMIN_TOKEN reaches the server for get, explain and health', async () => {
    const admin = ['--admin', locked.adminUrl];
    const refused = await canopy(['explain', '--service', 'echo', ...admin]);
    assert.equal(refused.status, 1);
    assert.match(refused.stderr, /needs the admin token \(401\): give --token-file FILE, or set CANOPY_ADMIN_TOKEN/);
    const file = await canopy([
      'explain',
      '--service',
      'echo',
      '--region',
      'r1',
      '-o',
      'json',
      ...admin,
      '--token-file',
      tokenFile,
    ]);
    assert.equal(file.status, 0, file.stderr);
    assert.equal((JSON.parse(file.stdout) as { service: string }).service, 'echo');
    const env = await canopy(['get', 'endpoints', '-o', 'yaml', ...admin], {
      env: { CANOPY_ADMIN_TOKEN: 's3cret-token-of-32-characters-xx' },
    });
    assert.equal(env.status, 0, env.stderr);
    assert.equal((load(env.stdout) as { endpoints: unknown[] }).endpoints.length, 3);
    const health = await canopy(['health', 'echo', '10.0.0.3:80', 'draining', ...admin, '--token-file', tokenFile]);
    assert.equal(health.status, 0, health.stderr);
    const res = await fetch(`${locked.adminUrl}/api/v1/services/echo`, {
      headers: { authorization: 'Bearer s3cret-token-of-32-characters-xx' },
    });
    const held = (await res.json()) as { endpoints: { address: string; health: string }[] };
    assert.ok(held.endpoints.some((e) => e.address === '10.0.0.3' && e.health === 'draining'));
  });

  it('health marks endpoints, then a whole locality, and back; what it cannot do exits 1 or 2', async () => {
    const admin = ['--admin', open.adminUrl];
    const one = await canopy(['health', 'echo', '10.0.0.1:80', 'unhealthy', ...admin]);
    assert.equal(one.status, 0, one.stderr);
    assert.equal(one.stdout, 'echo/10.0.0.1:80 healthy → unhealthy\n');
    const zone = await canopy(['health', 'echo', '--locality', 'r1/z1', 'draining', ...admin]);
    assert.equal(zone.status, 0, zone.stderr);
    assert.deepEqual(await healthOf(open), ['10.0.0.1=draining', '10.0.0.2=draining', '10.0.0.3=healthy']);
    const back = await canopy(['health', 'echo', '-l', 'r1', 'healthy', ...admin]);
    assert.match(back.stdout, /10\.0\.0\.2:80 draining → healthy/);
    const again = await canopy(['health', 'echo', '-l', 'r1', 'healthy', ...admin]);
    assert.match(again.stdout, /10\.0\.0\.1:80 healthy \(unchanged\)/);
    assert.deepEqual(await healthOf(open), ['10.0.0.1=healthy', '10.0.0.2=healthy', '10.0.0.3=healthy']);
    const missing = await canopy(['health', 'echo', '10.0.0.9:80', 'unhealthy', ...admin]);
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /no endpoint 10\.0\.0\.9:80/);
    const state = await canopy(['health', 'echo', '10.0.0.1:80', 'sick', ...admin]);
    assert.equal(state.status, 2);
    assert.match(state.stderr, /the state \(healthy, unhealthy, draining, terminating\), got "sick"/);
    const both = await canopy(['health', 'echo', '10.0.0.1:80', '--locality', 'r1', 'healthy', ...admin]);
    assert.equal(both.status, 2);
  });

  it('apply -f - reads standard input; import reads - and prints -o json', async () => {
    const next = structuredClone(MESH);
    next.services[0]!.endpoints.push({ address: '10.0.0.4', port: 80, locality: { region: 'r2', zone: 'z2' } });
    const applied = await canopy(['apply', '-f', '-', '--admin', open.adminUrl], { input: JSON.stringify(next) });
    assert.equal(applied.status, 0, applied.stderr);
    assert.match(applied.stdout, /service\/echo configured\n {2}\+ 10\.0\.0\.4:80/);
    const istio =
      'apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: { name: web }\n' +
      'spec:\n  hosts: [web.example]\n  ports: [{ number: 80, name: http, protocol: HTTP }]\n' +
      '  resolution: STATIC\n  endpoints: [{ address: 10.1.0.1 }]\n';
    const imported = await canopy(['import', 'istio', '-', '-o', 'json'], { input: istio });
    assert.equal(imported.status, 0, imported.stderr);
    assert.equal((JSON.parse(imported.stdout) as { services: { name: string }[] }).services.length, 1);
  });

  it('validate lists 20 errors and counts the rest; --max-errors 0 lists all', async () => {
    const bad = path.join(dir, 'many.yaml');
    const endpoints = Array.from({ length: 30 }, (_, i) => `      - { address: 10.0.0.${300 + i}, port: 80 }`);
    writeFileSync(bad, `services:\n  - name: echo\n    endpoints:\n${endpoints.join('\n')}\n`);
    const capped = await canopy(['validate', bad]);
    assert.equal(capped.status, 1);
    assert.match(capped.stderr, /30 error\(s\)/);
    assert.equal(capped.stderr.match(/^ {2}services/gm)?.length, 20);
    assert.match(capped.stderr, /… and 10 more \(--max-errors 0 lists them all\)/);
    const all = await canopy(['validate', '--max-errors', '0', bad]);
    assert.equal(all.stderr.match(/^ {2}services/gm)?.length, 30);
  });

  it('bootstrap refuses an empty --node-id and names an -O path it cannot write', async () => {
    const empty = await canopy(['bootstrap', 'grpc', '--node-id', '']);
    assert.equal(empty.status, 2);
    assert.match(empty.stderr, /--node-id <id>.*must not be empty/);
    const out = path.join(dir, 'no-such-dir', 'bootstrap.json');
    const unwritable = await canopy(['bootstrap', 'grpc', '--node-id', 'n', '-O', out]);
    assert.equal(unwritable.status, 1);
    assert.match(unwritable.stderr, new RegExp(`cannot write -O ${out.replace(/[.]/g, '\\.')}: ENOENT`));
    const stdout = await canopy(['bootstrap', 'grpc', '--node-id', 'n']);
    assert.equal((JSON.parse(stdout.stdout) as { node: { id: string } }).node.id, 'n', 'stdout without -O');
  });

  it("the README's schema line works from where a user's config lives, with canopy schema -O", async () => {
    const readme = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');
    const yaml = /```yaml\n(# yaml-language-server: \$schema=(\S+)\n[\s\S]*?)```/.exec(readme);
    assert.ok(yaml, 'the README has a mesh.yaml that names its schema');
    const home = mkdtempSync(path.join(dir, 'user-'));
    writeFileSync(path.join(home, 'mesh.yaml'), yaml[1]!);
    const wrote = await canopy(['schema', '-O', path.join(home, 'mesh.schema.json')]);
    assert.equal(wrote.status, 0, wrote.stderr);
    // An editor resolves the schema relative to the config file.
    const schema = JSON.parse(readFileSync(path.resolve(home, yaml[2]!), 'utf8')) as object;
    const check = new Ajv({ strict: true }).compile(schema);
    assert.ok(check(load(yaml[1]!)), JSON.stringify(check.errors));
    assert.equal(check({ services: [{ name: 'x', endpoints: [], typo: 1 }] }), false, 'the schema checks fields');
  });

  it('bash completion completes nested subcommands and flag values', async (t) => {
    const script = (await canopy(['completion', 'bash'])).stdout;
    const cases: [string[], string][] = [
      [['canopy', 'agent', 'un'], 'uninstall'],
      [['canopy', 'agent', 'uninstall', '--pi'], '--pin-dir'],
      [['canopy', 'get', '-o', ''], 'table wide name json yaml'],
      [['canopy', 'get', 's'], 'services service svc skipped'],
      [['canopy', 'delete', 's'], 'services service svc'],
      [['canopy', 'ps', '--x'], '--xds'],
      [['canopy', 'ver'], 'version'],
      [['canopy', 'serve', '--log-format', ''], 'pretty json'],
      [['canopy', 'explain', '--output', 'y'], 'yaml'],
      [['canopy', 'bootstrap', 'e'], 'envoy'],
      [['canopy', 'he'], 'health'],
    ];
    const lines = cases.map(
      ([words]) =>
        `COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _canopy; echo "\${COMPREPLY[*]}"`,
    );
    const bash = spawnSync('bash', ['-c', `${script}\n${lines.join('\n')}`], { encoding: 'utf8' });
    if (bash.error) return t.skip('bash is not installed');
    assert.equal(bash.status, 0, bash.stderr);
    assert.deepEqual(
      bash.stdout.trimEnd().split('\n'),
      cases.map(([, want]) => want),
    );
  });
});

/**
 * Runs `command` (detached, in its own process group) until `ready` shows in its stdout or stderr, then
 * ends the group; what it printed. Bounded: 30 s.
 */
function untilReady(command: string, args: string[], ready: RegExp): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const out = { stdout: '', stderr: '' };
    let done = false;
    const stop = () => {
      if (done) return;
      done = true;
      // Let the ready lines flush, then end the group this test started.
      setTimeout(() => {
        try {
          process.kill(-child.pid!, 'SIGTERM');
        } catch {
          // already gone
        }
      }, 300);
    };
    const take = (k: 'stdout' | 'stderr') => (d: Buffer) => {
      out[k] += d.toString();
      if (ready.test(out.stdout + out.stderr)) stop();
    };
    child.stdout.on('data', take('stdout'));
    child.stderr.on('data', take('stderr'));
    const timer = setTimeout(stop, 30_000);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, ...out });
    });
  });
}

describe('canopy serve: logs for a person or a machine, and the web view address', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-serve-log-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const config = path.join(dir, 'mesh.json');
  writeFileSync(config, JSON.stringify(MESH));
  const serve = (extra: string[], data: string) => [
    CLI,
    'serve',
    '--config',
    config,
    '--xds-port',
    '0',
    '--admin-port',
    '0',
    '--data-dir',
    path.join(dir, data),
    ...extra,
  ];
  const READY = /the web view is at/;

  it('JSON lines when not a terminal; pretty lines when asked; the web view URL once ready', async () => {
    const [json, pretty] = await Promise.all([
      untilReady(process.execPath, serve([], 'j'), READY),
      untilReady(process.execPath, serve(['--log-format', 'pretty'], 'p'), READY),
    ]);
    const ready = json.stdout.split('\n').find((l) => l.includes('"canopy ready"'));
    assert.ok(ready, json.stdout + json.stderr);
    const record = JSON.parse(ready) as { webView: string };
    assert.match(record.webView, /^http:\/\/127\.0\.0\.1:\d+\/ui\/$/);
    assert.ok(json.stderr.includes(`the web view is at ${record.webView}`), json.stderr);
    assert.match(pretty.stdout, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: canopy ready /m);
    assert.ok(!pretty.stdout.includes('{"level"'), 'no JSON lines');
    assert.match(pretty.stderr, /the web view is at http:\/\/127\.0\.0\.1:\d+\/ui\//);
  });

  it('in a terminal, pretty is the default (through script(1))', async (t) => {
    const probe = spawnSync('script', ['--version'], { encoding: 'utf8' });
    if (probe.error) {
      if (process.env['CI'] === 'true') assert.fail('script(1) (util-linux) is missing in CI');
      return t.skip('script(1) is not installed: cannot give the server a terminal');
    }
    const cmd = [process.execPath, ...serve([], 't')].map((a) => `'${a}'`).join(' ');
    const r = await untilReady('script', ['-qfec', cmd, '/dev/null'], READY);
    assert.match(r.stdout, /INFO.*canopy ready/);
    assert.ok(!r.stdout.includes('{"level"'), 'no JSON lines in a terminal');
  });
});
