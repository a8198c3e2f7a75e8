/**
 * cgroup v2 facts the datapath needs about a directory: that it is one, the
 * kernel's id of it and its level in the hierarchy.
 */
import { existsSync, readFileSync, realpathSync, statfsSync, statSync } from 'node:fs';
import path from 'node:path';
import { CodedError } from '../domain/errors.js';

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
  if (!root) throw new CodedError('CANOPY_BAD_CGROUP', `cgroup ${dir} is not in a cgroup v2 hierarchy`);
  return path.relative(root, real).split(path.sep).filter(Boolean).length;
}

/** The kernel's cgroup id of a cgroup v2 directory: its inode number. */
export function cgroupId(dir: string): bigint {
  const st = statSync(dir, { bigint: true });
  if (!st.isDirectory()) throw new CodedError('CANOPY_BAD_CGROUP', `cgroup ${dir} is not a directory`);
  return st.ino;
}

/** statfs f_type of a cgroup v2 filesystem (linux/magic.h). */
const CGROUP2_SUPER_MAGIC = 0x63677270;

/** Throws, naming the flag, unless `dir` is a directory of a cgroup v2 hierarchy. */
export function assertCgroupDir(dir: string): void {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    throw new CodedError('CANOPY_BAD_CGROUP', `--cgroup ${dir} is not a directory (a cgroup v2 directory is required)`);
  }
  const fsType = statfsSync(dir).type;
  if (fsType !== CGROUP2_SUPER_MAGIC) {
    throw new CodedError(
      'CANOPY_BAD_CGROUP',
      `--cgroup ${dir} is not a cgroup v2 directory (its filesystem type is 0x${fsType.toString(16)}, not cgroup2): ` +
        'name a directory of the cgroup v2 hierarchy, e.g. /sys/fs/cgroup or a cgroup under it',
    );
  }
}
