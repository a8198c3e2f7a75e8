// Bundles the web view (server/ui) into dist/ui: one ES module, its CSS and the page. No CDN, works offline.
import { build } from 'esbuild';
import { copyFile, mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const out = here('../../dist/ui/');

await mkdir(out, { recursive: true });
await build({
  entryPoints: [here('src/main.ts')],
  outfile: `${out}app.js`,
  bundle: true,
  format: 'esm',
  target: ['es2022'],
  minify: true,
  legalComments: 'none',
  logLevel: 'warning',
});
await Promise.all(['index.html', 'app.css'].map((f) => copyFile(here(f), `${out}${f}`)));
