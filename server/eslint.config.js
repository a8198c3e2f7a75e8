// typescript-eslint's recommended rules over the TypeScript sources, plus the layering of STYLE.md:
// domain ← policy ← wire/resources ← sessions ← transport/admin/agent/store ← main, and only transport/
// speaks gRPC. Each folder lists what it may not import; a later entry replaces an earlier one for its files.
import tseslint from 'typescript-eslint';

const GRPC = { name: '@grpc/grpc-js', message: 'gRPC lives in server/src/transport/ only.' };
const IO = ['node:*', '@grpc/*', 'fastify', 'fastify/*', 'pino', 'prom-client'];

/** A `no-restricted-imports` rule for one layer: the folders above it and the packages it must not use. */
function layer(what, above, packages = [], paths = [GRPC]) {
  const patterns = [];
  if (above.length > 0)
    patterns.push({ group: above.map((dir) => `../${dir}/*`), message: `${what} may not import a layer above it.` });
  if (packages.length > 0) patterns.push({ group: packages, message: `${what} is pure: no I/O, gRPC, HTTP or logging.` });
  return ['error', { paths, patterns }];
}

const UPPER = ['transport', 'admin', 'agent', 'store', 'main.js', 'cli', 'demo'];

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
    files: ['server/src/domain/**/*.ts'],
    rules: {
      'no-restricted-imports': layer('domain/', ['policy', 'wire', 'resources', 'sessions', ...UPPER, 'paths.js'], IO),
    },
  },
  {
    files: ['server/src/policy/**/*.ts'],
    rules: { 'no-restricted-imports': layer('policy/', ['wire', 'resources', 'sessions', ...UPPER], IO) },
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
    rules: { 'no-restricted-imports': layer('sessions/ (no gRPC, no I/O)', UPPER, IO) },
  },
  {
    files: ['server/src/transport/**/*.ts'],
    rules: { 'no-restricted-imports': layer('transport/', ['admin', 'store', 'main.js', 'cli', 'demo'], [], []) },
  },
  {
    files: ['server/src/admin/**/*.ts'],
    rules: { 'no-restricted-imports': layer('admin/', ['transport', 'agent', 'main.js', 'cli', 'demo']) },
  },
  {
    files: ['server/src/store/**/*.ts'],
    rules: { 'no-restricted-imports': layer('store/', ['sessions', 'transport', 'admin', 'agent', 'main.js', 'cli', 'demo']) },
  },
  {
    files: ['server/src/agent/**/*.ts'],
    rules: { 'no-restricted-imports': layer('agent/', ['sessions', 'admin', 'store', 'main.js', 'cli', 'demo']) },
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
