/**
 * Builds the Go programs of the peer benchmark (bench/peers/go-control-plane: the go-control-plane
 * server and the stream driver) with the machine's Go toolchain, into a cache outside the repo keyed
 * by a digest of the module's sources, go.mod and go.sum: a rebuild only when they change. Never run by
 * `npm test`; nothing built is committed.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, utimesSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The module, from dist/bench (compiled) back to the source tree. */
export const PEER_MODULE = fileURLToPath(new URL('../../bench/peers/go-control-plane/', import.meta.url));
const CACHE = fileURLToPath(new URL('../../node_modules/.cache/canopy-go-peer/', import.meta.url));

/** A cached build unused this long is removed when another is built. */
const STALE_MS = 7 * 24 * 3600_000;

export interface PeerBinaries {
  readonly peer: string;
  readonly driver: string;
  readonly goVersion: string;
  /** Whether this call built them (false: taken from the cache). */
  readonly built: boolean;
}

function sources(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const file = path.join(dir, name);
      if (statSync(file).isDirectory()) return sources(file);
      return /\.go$|^go\.(mod|sum)$/.test(name) ? [file] : [];
    });
}

/** The binaries, built if the cache lacks this version of the sources; throws (with why) if Go is missing. */
export function buildPeer(log: (line: string) => void = () => {}): PeerBinaries {
  let goVersion: string;
  try {
    goVersion = execFileSync('go', ['version'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('the peer benchmark needs Go on PATH (https://go.dev/dl/): `go` was not found');
  }
  const hash = createHash('sha256');
  for (const file of sources(PEER_MODULE)) hash.update(path.relative(PEER_MODULE, file)).update(readFileSync(file));
  hash.update(goVersion);
  const dir = path.join(CACHE, hash.digest('hex').slice(0, 16));
  const peer = path.join(dir, 'go-control-plane-peer');
  const driver = path.join(dir, 'xds-driver');
  if (existsSync(peer) && existsSync(driver)) {
    utimesSync(dir, new Date(), new Date()); // in use: kept by other checkouts' clean-up
    return { peer, driver, goVersion, built: false };
  }
  mkdirSync(dir, { recursive: true });
  log(`building the go-control-plane peer and the xds driver (${goVersion}) into ${dir}…`);
  const go = (args: string[]) =>
    execFileSync('go', args, { cwd: PEER_MODULE, stdio: ['ignore', 'inherit', 'inherit'], timeout: 900_000 });
  go(['build', '-trimpath', '-o', peer, './cmd/peer']);
  go(['build', '-trimpath', '-o', driver, './cmd/xds-driver']);
  // Builds of other sources not used for a week go; newer ones may be another checkout's, in use now.
  for (const other of readdirSync(CACHE)) {
    const old = path.join(CACHE, other);
    if (old !== dir && Date.now() - statSync(old).mtimeMs > STALE_MS) rmSync(old, { recursive: true, force: true });
  }
  return { peer, driver, goVersion, built: true };
}
