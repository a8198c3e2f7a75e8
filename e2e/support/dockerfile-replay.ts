/**
 * A test peer for Dockerfiles where no Docker engine runs: parses one, and
 * replays its stages in empty temporary directories, one per stage standing
 * for its WORKDIR. A COPY from the build context copies what the context
 * holds (less .dockerignore); a COPY --from copies out of that stage's
 * directory; a missing source fails the replay as it fails `docker build`.
 * RUN steps of the stages other stages copy from are run with `sh -c` in the
 * stage's directory, with three stand-ins, each said in `notes`:
 * - `npm ci`: node_modules is linked to the checkout's installed one (same
 *   lockfile) instead of downloading it again;
 * - `npm prune`: not run (it would prune the shared install); the packages it
 *   keeps are the lockfile's, which `npm ci` checks;
 * - `apt-get` and its clean-up: not run (system packages; the CI image has them).
 * RUN steps of the final stage set up system paths (users, directories) and are
 * not replayed; the final stage's layout is assembled so its entry point can be run.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface Instruction {
  readonly op: string;
  readonly args: string;
  readonly line: number;
}

export interface Stage {
  readonly name: string;
  readonly from: string;
  readonly steps: readonly Instruction[];
}

/** Instructions by stage; continuation lines joined, comments dropped. */
export function parseDockerfile(text: string): Stage[] {
  const stages: { name: string; from: string; steps: Instruction[] }[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let line = lines[i]!;
    while (line.trimEnd().endsWith('\\') && i + 1 < lines.length)
      line = `${line.trimEnd().slice(0, -1)} ${lines[++i]!.trim()}`;
    const t = line.trim();
    if (t === '' || t.startsWith('#')) continue;
    const m = /^(\w+)\s+(.*)$/.exec(t);
    if (!m) throw new Error(`line ${start + 1}: cannot read "${t}"`);
    const op = m[1]!.toUpperCase();
    const args = m[2]!.trim();
    if (op === 'FROM') {
      const f = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      stages.push({ name: f?.[2] ?? String(stages.length), from: f?.[1] ?? args, steps: [] });
      continue;
    }
    const stage = stages.at(-1);
    if (!stage) throw new Error(`line ${start + 1}: ${op} before FROM`);
    stage.steps.push({ op, args, line: start + 1 });
  }
  return stages;
}

/** The words of a shell-form list, or of a JSON (exec-form) array. */
export function words(args: string): string[] {
  return args.startsWith('[') ? (JSON.parse(args) as string[]) : args.split(/\s+/).filter((w) => w !== '');
}

function ignored(context: string): (rel: string) => boolean {
  const file = path.join(context, '.dockerignore');
  const patterns = existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l !== '' && !l.startsWith('#'))
    : [];
  return (rel) =>
    patterns.some((p) => (p.startsWith('*.') ? rel.endsWith(p.slice(1)) : rel === p || rel.startsWith(`${p}/`)));
}

export interface Replay {
  /** Stage name → its directory. */
  readonly dirs: ReadonlyMap<string, string>;
  /** The final stage's directory, its entry point and command. */
  readonly final: { readonly dir: string; readonly entrypoint: string[]; readonly cmd: string[] };
  readonly notes: readonly string[];
  cleanup(): void;
}

/**
 * Replays `dockerfile` with `context` as the build context. `installed` is
 * the node_modules an `npm ci` stands for.
 */
export function replayDockerfile(dockerfile: string, context: string, installed: string): Replay {
  const stages = parseDockerfile(readFileSync(dockerfile, 'utf8'));
  const root = mkdtempSync(path.join(os.tmpdir(), 'canopy-docker-'));
  const dirs = new Map<string, string>();
  const notes: string[] = [];
  const skip = ignored(context);
  const sources = new Set(
    stages.flatMap((s) =>
      s.steps.filter((i) => i.op === 'COPY').flatMap((i) => /--from=(\S+)/.exec(i.args)?.[1] ?? []),
    ),
  );
  const fail = (i: Instruction, why: string) =>
    new Error(`${path.basename(dockerfile)}:${i.line}: ${i.op} ${i.args}: ${why}`);
  let entrypoint: string[] = [];
  let cmd: string[] = [];
  let finalDir = '';
  try {
    stages.forEach((stage, index) => {
      const dir = path.join(root, `stage-${index}`);
      mkdirSync(dir, { recursive: true });
      dirs.set(stage.name, dir);
      const replayRuns = sources.has(stage.name);
      for (const i of stage.steps) {
        if (i.op === 'WORKDIR') {
          if (i.args !== '/app') throw fail(i, 'the replay stands one directory for /app');
        } else if (i.op === 'COPY') {
          const w = words(i.args);
          const from = /^--from=(\S+)$/.exec(w[0] ?? '')?.[1];
          const list = from !== undefined ? w.slice(1) : w;
          const dest = list.at(-1)!;
          const srcs = list.slice(0, -1);
          const base = from !== undefined ? dirs.get(from) : context;
          if (!base) throw fail(i, `no stage "${from}"`);
          for (const src of srcs) {
            const rel = from !== undefined ? path.relative('/app', src) : src;
            const at = path.join(base, rel);
            if (!existsSync(at) || (from === undefined && skip(path.normalize(rel))))
              throw fail(i, `${src} is not in ${from !== undefined ? `stage ${from}` : 'the build context'}`);
            const target =
              dest.endsWith('/') || srcs.length > 1 ? path.join(dir, dest, path.basename(rel)) : path.join(dir, dest);
            mkdirSync(path.dirname(target), { recursive: true });
            if (from === undefined && statSync(at).isDirectory())
              cpSync(at, target, { recursive: true, filter: (p) => !skip(path.relative(context, p)) });
            else cpSync(at, target, { recursive: true, verbatimSymlinks: true });
          }
        } else if (i.op === 'RUN') {
          if (!replayRuns) {
            notes.push(`${path.basename(dockerfile)}:${i.line}: final-stage RUN not replayed: ${i.args}`);
            continue;
          }
          const script = i.args
            .split('&&')
            .map((part) => part.trim())
            .map((part) => {
              if (/^npm ci\b/.test(part)) {
                if (!existsSync(path.join(dir, 'package-lock.json'))) throw fail(i, 'npm ci without package-lock.json');
                symlinkSync(installed, path.join(dir, 'node_modules'));
                notes.push(`${path.basename(dockerfile)}:${i.line}: npm ci: node_modules linked to the installed one`);
                return 'true';
              }
              if (/^npm prune\b/.test(part)) {
                notes.push(`${path.basename(dockerfile)}:${i.line}: npm prune not run (shared install)`);
                return 'true';
              }
              if (/^(apt-get|rm -rf \/var\/lib\/apt)/.test(part)) {
                notes.push(`${path.basename(dockerfile)}:${i.line}: system packages not installed: ${part}`);
                return 'true';
              }
              return part;
            })
            .join(' && ');
          try {
            execFileSync('sh', ['-c', script], { cwd: dir, stdio: 'pipe', timeout: 300_000 });
          } catch (e) {
            const err = e as { stdout?: Buffer; stderr?: Buffer };
            throw fail(i, `failed:\n${String(err.stdout ?? '')}${String(err.stderr ?? '')}`);
          }
        } else if (i.op === 'ENTRYPOINT') entrypoint = words(i.args);
        else if (i.op === 'CMD') cmd = words(i.args);
      }
      finalDir = dir;
    });
  } catch (e) {
    rmSync(root, { recursive: true, force: true });
    throw e;
  }
  return {
    dirs,
    final: { dir: finalDir, entrypoint, cmd },
    notes,
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}
