/**
 * A throwaway CA and certificates for TLS tests, made with Debian's openssl:
 * a server certificate for 127.0.0.1, and client certificates carrying a
 * SPIFFE ID as a URI SAN.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface Pem {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly certFile: string;
  readonly keyFile: string;
}

export interface TestCa {
  readonly dir: string;
  readonly caCert: Buffer;
  readonly caFile: string;
  server(): Pem;
  client(spiffeId: string): Pem;
}

/** Whether openssl can be run; tests skip (or fail under CI) without it. */
export function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export function makeTestCa(name = 'canopy-test-ca'): TestCa {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-certs-'));
  const f = (n: string) => path.join(dir, n);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  ssl(
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-keyout',
    f('ca.key'),
    '-out',
    f('ca.pem'),
  );
  let serial = 0;
  const issue = (cn: string, san: string, usage: string): Pem => {
    const base = `${cn.replace(/[^a-z0-9]/gi, '_')}-${++serial}`;
    writeFileSync(f(`${base}.ext`), `subjectAltName=${san}\nextendedKeyUsage=${usage}\nbasicConstraints=CA:FALSE\n`);
    ssl(
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-subj',
      `/CN=${cn}`,
      '-keyout',
      f(`${base}.key`),
      '-out',
      f(`${base}.csr`),
    );
    ssl(
      'x509',
      '-req',
      '-in',
      f(`${base}.csr`),
      '-CA',
      f('ca.pem'),
      '-CAkey',
      f('ca.key'),
      '-CAcreateserial',
      '-days',
      '2',
      '-extfile',
      f(`${base}.ext`),
      '-out',
      f(`${base}.pem`),
    );
    return {
      cert: readFileSync(f(`${base}.pem`)),
      key: readFileSync(f(`${base}.key`)),
      certFile: f(`${base}.pem`),
      keyFile: f(`${base}.key`),
    };
  };
  return {
    dir,
    caCert: readFileSync(f('ca.pem')),
    caFile: f('ca.pem'),
    server: () => issue('canopy', 'IP:127.0.0.1,DNS:localhost', 'serverAuth'),
    client: (spiffeId) => issue('client', `URI:${spiffeId}`, 'clientAuth'),
  };
}
