// typescript-eslint's recommended rules over the TypeScript sources, plus the layering of STYLE.md, bottom up:
//   domain, policy (pure) ← platform (process-level: paths, heap growth, collection, signals)
//   ← wire, resources ← sessions ← transport, admin, agent, store ← config, kube (the sources) ← serve
//   ← main.ts, security.ts, cli, demo
// Only transport/ speaks gRPC. The sources sit above the store: config/ reads the config file and kube/ watches
// Kubernetes, and each writes what it reads through the Store interface, so store/ (and everything else below
// them) may import neither; neither imports the other. Each folder lists what it may not import, subfolders
// included (domain/load, store/level, store/etcd, resources/endpoint); a later entry replaces an earlier one for
// its files. import-x/no-cycle forbids import circles (value imports; type-only imports erase at build time and
// are not followed).
import importX from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';
import tseslint from 'typescript-eslint';

const GRPC = { name: '@grpc/grpc-js', message: 'gRPC lives in server/src/transport/ only.' };
const IO = ['node:*', '@grpc/*', 'fastify', 'fastify/*', 'pino', 'prom-client'];

/**
 * A relative specifier that climbs out of its folder (any depth) into one of `dirs` (`x.js` names a file).
 * domain/errors.ts, the one coded error base, imports nothing: every layer may throw its errors.
 */
function into(dirs) {
  const names = dirs.map((d) => (d === 'domain' ? 'domain(?!/errors\\.js$)' : d.replace(/\./g, '\\.')));
  return `^(\\.\\./)+(${names.join('|')})(/|$)`;
}

/** A `no-restricted-imports` rule for one layer: the folders above it and the packages it must not use. */
function layer(what, above, packages = [], paths = [GRPC]) {
  const patterns = [];
  if (above.length > 0) patterns.push({ regex: into(above), message: `${what} may not import a layer above it.` });
  if (packages.length > 0)
    patterns.push({ group: packages, message: `${what} is pure: no I/O, gRPC, HTTP or logging.` });
  return ['error', { paths, patterns }];
}

const TOP = ['main.js', 'serve', 'security.js', 'cli', 'demo'];
const SOURCES = ['config', 'kube'];
const UPPER = ['transport', 'admin', 'agent', 'store', ...SOURCES, ...TOP];

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'bench/results/'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  { files: ['server/src/**/*.ts'], rules: { 'no-restricted-imports': layer('server/src', []) } },
  {
    // Functions that fit on a screen and files of one concern (STYLE.md): blank lines and comments not counted.
    files: ['server/src/**/*.ts'],
    rules: {
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }],
      'max-lines': ['error', { max: 400, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    // One coded error base (domain/errors.ts): a bare Error has no stable code for logs, scripts or the docs' tables.
    files: ['server/src/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "NewExpression[callee.name='Error']",
          message: 'Throw a CodedError (domain/errors.ts) with a stable code; add the code to docs/operations.md.',
        },
      ],
    },
  },

  {
    files: ['server/src/**/*.ts', 'e2e/**/*.ts', 'bench/**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      // The plugin parses each imported module to follow its imports: .ts files with typescript-eslint's parser.
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: 'tsconfig.json' })],
    },
    rules: { 'import-x/no-cycle': 'error' },
  },
  {
    files: ['server/src/domain/**/*.ts'],
    rules: {
      'no-restricted-imports': layer('domain/', ['policy', 'platform', 'wire', 'resources', 'sessions', ...UPPER], IO),
    },
  },
  {
    files: ['server/src/policy/**/*.ts'],
    rules: { 'no-restricted-imports': layer('policy/', ['platform', 'wire', 'resources', 'sessions', ...UPPER], IO) },
  },
  {
    files: ['server/src/wire/**/*.ts'],
    rules: { 'no-restricted-imports': layer('wire/', ['domain', 'policy', 'resources', 'sessions', ...UPPER]) },
  },
  {
    files: ['server/src/resources/**/*.ts'],
    rules: { 'no-restricted-imports': layer('resources/', ['sessions', ...UPPER]) },
  },
  {
    files: ['server/src/sessions/**/*.ts'],
    rules: { 'no-restricted-imports': layer('sessions/ (no gRPC, no I/O)', ['platform', ...UPPER], IO) },
  },
  {
    files: ['server/src/transport/**/*.ts'],
    rules: { 'no-restricted-imports': layer('transport/', ['admin', 'store', ...SOURCES, ...TOP], [], []) },
  },
  {
    files: ['server/src/admin/**/*.ts'],
    rules: { 'no-restricted-imports': layer('admin/', ['transport', 'agent', ...SOURCES, ...TOP]) },
  },
  {
    files: ['server/src/store/**/*.ts'],
    rules: {
      'no-restricted-imports': layer('store/', ['sessions', 'transport', 'admin', 'agent', ...SOURCES, ...TOP]),
    },
  },
  {
    files: ['server/src/agent/**/*.ts'],
    rules: { 'no-restricted-imports': layer('agent/', ['sessions', 'admin', 'store', ...SOURCES, ...TOP]) },
  },
  {
    // Process-level concerns (package paths, V8's heap growth, a full collection, signals): below every I/O layer,
    // importing none of the server's folders.
    files: ['server/src/platform/**/*.ts'],
    rules: {
      'no-restricted-imports': layer('platform/', ['domain', 'policy', 'wire', 'resources', 'sessions', ...UPPER]),
    },
  },
  {
    // The config file (the file source): read, validated (domain/, policy/), applied and recorded through the store.
    files: ['server/src/config/**/*.ts'],
    rules: { 'no-restricted-imports': layer('config/', ['sessions', 'transport', 'admin', 'agent', 'kube', ...TOP]) },
  },
  {
    // The Kubernetes source: watches API servers (client-node), maps what they hold (policy/k8s-live.ts) and writes
    // it through the store; its gauges are its own (kube-metrics.ts), so admin/ never imports it.
    files: ['server/src/kube/**/*.ts'],
    rules: { 'no-restricted-imports': layer('kube/', ['sessions', 'transport', 'admin', 'agent', 'config', ...TOP]) },
  },
  {
    // The parts main.ts wires (the xDS side, load-aware locality, the two edges): above every layer of the server,
    // below the composition root and the command line.
    files: ['server/src/serve/**/*.ts'],
    rules: { 'no-restricted-imports': layer('serve/', ['main.js', 'cli', 'demo']) },
  },
  {
    // The command line sits above the server's layers: it may import any of them, nothing imports it.
    files: ['server/src/cli/**/*.ts'],
    rules: { 'no-restricted-imports': layer('cli/', []) },
  },
  {
    // The demo is a gRPC client application shipped with the CLI (an echo backend and a grpc-js-xds client),
    // not a layer of the server: it uses gRPC as any client of Canopy does.
    files: ['server/src/demo/**/*.ts'],
    rules: { 'no-restricted-imports': 'off' },
  },
);
