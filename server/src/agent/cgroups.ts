/**
 * cgroup v2 facts the datapath needs about a directory: the kernel's id of it
 * and its level in the hierarchy.
 */
import { readFileSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';

/**
 * A cgroup directory's level in its cgroup v2 hierarchy (the mount's root is
 * level 0), as bpf_get_current_ancestor_cgroup_id counts.
 */
export function cgroupLevel(dir: string): number {
  const real = realpathSync(dir);
  let root = '';
  for (const line of readFileSync('/proc/mounts', 'utf8').split('\n')) {
    const [, mnt, type] = line.split(' ');
    if (type !== 'cgroup2' || !mnt) continue;
    if ((real === mnt || real.startsWith(mnt.endsWith('/') ? mnt : `${mnt}/`)) && mnt.length > root.length) root = mnt;
  }
  if (!root) throw new Error(`cgroup ${dir} is not in a cgroup v2 hierarchy`);
  return path.relative(root, real).split(path.sep).filter(Boolean).length;
}

/** The kernel's cgroup id of a cgroup v2 directory: its inode number. */
export function cgroupId(dir: string): bigint {
  const st = statSync(dir, { bigint: true });
  if (!st.isDirectory()) throw new Error(`cgroup ${dir} is not a directory`);
  return st.ino;
}
