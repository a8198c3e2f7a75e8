/**
 * The one owner of the config file while the server runs: at start it
 * brings the store up to the file (config-start.ts: read once, or found
 * already recorded), then it watches the file and applies each valid edit
 * (config-reload.ts, config-watch.ts) under the ownership rule
 * (file-source.ts), recording what it applied (config-record.ts), and it
 * tells what the store keeps over the file (config-overrides.ts). The
 * reading, validating and applying stay in those modules; this class is the
 * order they run in, and the log and the reload count an operator reads.
 * Nothing else in the server reads or parses the file once it started.
 */
import type { Logger } from 'pino';
import type { CanopyConfig } from '../domain/spec.js';
import type { Store } from '../store/store.js';
import path from 'node:path';
import { readFile } from 'node:fs/promises';
import { parseConfigTextAside } from './config-file.js';
import { storeOverrides, type StoreOverrides } from './config-overrides.js';
import { logHealthMarks, reloadConfigOnEdit, type ReloadOutcome } from './config-reload.js';
import { fileHealthOf } from './file-health.js';
import { applyStartConfig, type StartApplied, type StartConfig } from './config-start.js';
import { applyFileServices } from './file-source.js';

/** How one load of the file ended (canopy_config_reloads_total's `result`). */
export type ConfigLoadOutcome = ReloadOutcome;

export interface ConfigSourceOptions {
  readonly store: Store;
  readonly logger: Logger;
  /** The config given at start; its services are applied when there is no `startConfig`. */
  readonly config: CanopyConfig;
  /** The file to watch: valid edits apply, invalid ones are logged and ignored. */
  readonly file?: string;
  /** The file as read at start (config-start.ts). */
  readonly startConfig?: StartConfig;
  /** The data directory that records each applied file, if any. */
  readonly recordDir?: string;
  /** Told how each load (at start and on every edit) ended (canopy_config_reloads_total). */
  readonly loads: { loaded(outcome: ConfigLoadOutcome): void };
  /** On etcd, the replicas' agreement on one file (store/etcd/replica-files.ts). */
  readonly replicas?: {
    refuseEdit(digest: string): Promise<string | undefined>;
    applied(digest: string): Promise<void>;
  };
}

export class ConfigSource {
  private started: StartApplied | undefined;

  constructor(private readonly opts: ConfigSourceOptions) {}

  /** Brings the store up to the file read at start (or the services given in code). */
  async start(): Promise<StartApplied> {
    const { store, startConfig, recordDir } = this.opts;
    const initial: StartApplied = startConfig
      ? await applyStartConfig(store, startConfig, recordDir)
      : { ...(await applyFileServices(store, this.opts.config.services)), unchangedFile: false, keptApiChanges: [] };
    this.started = initial;
    logHealthMarks(this.opts.logger.child({ file: this.opts.file }), initial);
    this.opts.loads.loaded('success');
    if (this.opts.replicas && initial.digest !== undefined) await this.opts.replicas.applied(initial.digest);
    return initial;
  }

  /** Says, once the store is reported open, that an unchanged file was not parsed again. */
  logUnchanged(): void {
    const initial = this.started;
    if (!initial?.unchangedFile) return;
    this.opts.logger.info(
      {
        file: this.opts.file,
        services: initial.unchanged,
        keptApiChanges: initial.keptApiChanges.length,
        // Not even read: its status was the one recorded (config-start.ts).
        read: this.opts.startConfig?.unread !== true,
      },
      'config file unchanged since the store applied it: not parsed again',
    );
  }

  /** Watches the file, if there is one, and applies each valid edit (config-reload.ts); returns a function that stops. */
  watch(): () => void {
    const { file, store, logger, recordDir, replicas } = this.opts;
    if (file === undefined) return () => {};
    const digest = this.started?.digest;
    return reloadConfigOnEdit({
      file,
      store,
      logger,
      ...(recordDir !== undefined ? { recordDir } : {}),
      // The start read the file already: the watcher is not to read it again (a 100k-endpoint file is 9 MB).
      ...(digest !== undefined ? { initialDigest: digest } : {}),
      ...(this.opts.startConfig?.recorded === undefined
        ? { fileHealth: fileHealthOf((this.opts.startConfig?.config ?? this.opts.config).services) }
        : {}),
      loads: this.opts.loads,
      ...(replicas
        ? { refuse: (d: string) => replicas.refuseEdit(d), applied: (d: string) => replicas.applied(d) }
        : {}),
    });
  }

  /**
   * What the store keeps over the file at start (API changes to file-owned services, by the ownership rule),
   * or undefined. When the start found the unchanged file already applied it parsed nothing; the file is then
   * parsed here, once, and only when an API write changed a listed service (after ready, off the event loop
   * when big).
   */
  async overrides(): Promise<StoreOverrides | undefined> {
    const initial = this.started;
    const { file, store } = this.opts;
    if (!initial) return undefined;
    const written = new Set(initial.replaced);
    if (!initial.unchangedFile) return storeOverrides(store, this.opts.config.services, written);
    if (initial.keptApiChanges.length === 0 || file === undefined) return undefined;
    const text = await readFile(file, 'utf8').catch(() => undefined);
    const parsed = text === undefined ? undefined : await parseConfigTextAside(text, path.basename(file));
    if (!parsed?.ok) return undefined;
    const kept = new Set(initial.keptApiChanges);
    return storeOverrides(
      store,
      parsed.value.services.filter((s) => kept.has(s.name)),
      written,
    );
  }
}

/** What a load changed, as logged. */
export function applySummary(r: { replaced: readonly string[]; deleted: readonly string[]; unchanged: number }) {
  return { replaced: r.replaced.length, deleted: r.deleted.length, unchanged: r.unchanged };
}
