/**
 * "Give every replica the same config file", enforced. Replicas on one etcd
 * that apply different files overwrite each other's file-owned services on
 * every start (the service flips to whichever started last). So:
 *
 *   <prefix>replicas/<replica>   { host, pid, file, digest }, under a lease: the file each live replica applies
 *   <prefix>config/file          { host, pid, file, digest }: the file content last applied, and by whom
 *
 * A replica whose file's digest differs from `config/file` while a live
 * replica still applies that one refuses to start, naming both files, unless
 * started with --take-over (it then applies its file and becomes the
 * record). An edit is applied when this replica ran the recorded file (the
 * replicas move to the edit one by one, as a ConfigMap update reaches them)
 * or when the edit is the recorded file (a replica catching up); otherwise it
 * is refused the same way. A replica that stops revokes its lease; one killed
 * stops counting after the lease's TTL.
 * A separate etcd client, as load-share.ts; the store's watch ignores these keys.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import type { Etcd3, Lease } from 'etcd3';
import { CanopyError } from '../../domain/errors.js';
import { etcdClient } from './etcd-retry.js';

export interface ReplicaFile {
  readonly host: string;
  readonly pid: number;
  readonly file: string;
  readonly digest: string;
}

/** A killed replica stops counting this long after its last renewal. */
const TTL_SECONDS = 10;
const DEADLINE_MS = 2000;

export class ReplicaFiles {
  private readonly lease: Lease;
  private readonly replica = `${os.hostname().replace(/[^A-Za-z0-9.-]/g, '_')}-${process.pid}-${randomBytes(3).toString('hex')}`;

  private constructor(
    private readonly client: Etcd3,
    private readonly prefix: string,
    private self: ReplicaFile,
  ) {
    this.lease = client.lease(TTL_SECONDS);
  }

  /**
   * Checks this replica's file against the one the live replicas apply (unless `takeOver`), and registers it.
   * Throws a CanopyError naming both files when they differ.
   */
  static async open(opts: {
    endpoints: readonly string[];
    prefix: string;
    file: string;
    digest: string;
    takeOver: boolean;
  }): Promise<ReplicaFiles> {
    const self = { host: os.hostname(), pid: process.pid, file: path.resolve(opts.file), digest: opts.digest };
    const files = new ReplicaFiles(etcdClient(opts.endpoints), opts.prefix, self);
    try {
      const other = await files.liveOtherFile(opts.digest);
      if (other && !opts.takeOver) {
        throw new CanopyError(
          'CANOPY_INVALID_CONFIG',
          `this replica's config file ${describe(self)} differs from the one the live replicas on this store apply: ` +
            `${describe(other)}. Give every replica the same file, or start this one with --take-over ` +
            '(CANOPY_TAKE_OVER=1) to make its file the one they apply',
        );
      }
      await files.register();
      return files;
    } catch (err) {
      await files.close();
      throw err;
    }
  }

  /** The recorded file, when it is not `digest` and a live replica still applies it. */
  private async liveOtherFile(digest: string): Promise<ReplicaFile | undefined> {
    const recorded = await this.recorded();
    if (!recorded || recorded.digest === digest) return undefined;
    const live = await this.client
      .getAll()
      .prefix(`${this.prefix}replicas/`)
      .options({ deadline: Date.now() + DEADLINE_MS })
      .json();
    return Object.values(live as Record<string, ReplicaFile>).find((r) => r.digest === recorded.digest);
  }

  private async recorded(): Promise<ReplicaFile | undefined> {
    const r = await this.client
      .get(`${this.prefix}config/file`)
      .options({ deadline: Date.now() + DEADLINE_MS })
      .json();
    return (r as ReplicaFile | null) ?? undefined;
  }

  /** Why an edit (of content `digest`) must not be applied, or undefined when it may. */
  async refuseEdit(digest: string): Promise<string | undefined> {
    const recorded = await this.recorded();
    if (!recorded || recorded.digest === this.self.digest || recorded.digest === digest) return undefined;
    const other = await this.liveOtherFile(this.self.digest);
    if (!other) return undefined;
    return (
      `the live replicas on this store apply another file, ${describe(other)}, than this replica ` +
      `(${describe({ ...this.self, digest })}); restart it with --take-over to make its file the one they apply`
    );
  }

  /** This replica now applies `digest`: registered, and recorded as the store's file. */
  async applied(digest: string): Promise<void> {
    this.self = { ...this.self, digest };
    await this.register();
    await this.client
      .put(`${this.prefix}config/file`)
      .value(JSON.stringify(this.self))
      .options({ deadline: Date.now() + DEADLINE_MS })
      .exec();
  }

  private async register(): Promise<void> {
    await this.lease
      .put(`${this.prefix}replicas/${this.replica}`)
      .value(JSON.stringify(this.self))
      .options({ deadline: Date.now() + DEADLINE_MS })
      .exec();
  }

  async close(): Promise<void> {
    // Bounded: an unreachable etcd must not hold up shutdown (the lease then expires by itself).
    await Promise.race([
      this.lease.revoke({ deadline: Date.now() + DEADLINE_MS }).catch(() => {}),
      new Promise((r) => setTimeout(r, DEADLINE_MS).unref()),
    ]);
    this.client.close();
  }
}

function describe(r: ReplicaFile): string {
  return `${r.file} on ${r.host} (pid ${r.pid}, sha256 ${r.digest.slice(0, 12)})`;
}
