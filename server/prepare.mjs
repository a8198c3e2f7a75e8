// npm's `prepare` (run by `npm ci`, and by `npx canopy` when it links this clone into its cache):
// builds dist/ unless it is already newer than every source file, so that the first `npx canopy`
// after `npm ci` answers in seconds instead of rebuilding everything (docs/cli.md).
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const SOURCES = ['server/src', 'server/ui', 'server/test', 'e2e', 'bench', 'proto', 'tsconfig.json', 'package.json'];
/** What the build writes last in each of its steps. */
const OUTPUTS = ['dist/server/src/cli/canopy.js', 'dist/ui/app.js', 'dist/server/src/wire/envoy-descriptor.json'];

function newest(path) {
  const s = statSync(path, { throwIfNoEntry: false });
  if (!s) return 0;
  if (!s.isDirectory()) return s.mtimeMs;
  return Math.max(s.mtimeMs, ...readdirSync(path).map((name) => newest(`${path}/${name}`)));
}

function oldestOutput() {
  const times = OUTPUTS.map((p) => statSync(`${root}${p}`, { throwIfNoEntry: false })?.mtimeMs ?? 0);
  return Math.min(...times);
}

const current = oldestOutput() > Math.max(...SOURCES.map((p) => newest(`${root}${p}`)));
if (process.argv.includes('--check')) {
  // For tests: whether a prepare would build, without building.
  process.exit(current ? 0 : 1);
} else if (current) {
  process.stderr.write('canopy: dist/ is up to date (npm run build rebuilds it)\n');
} else {
  const run = spawnSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' });
  process.exit(run.status ?? 1);
}
