/**
 * The one owner of the config file while the server runs: at start it
 * brings the store up to the file (config-start.ts: read once, or found
 * already recorded), then it watches the file (config-file.ts) and applies
 * each valid edit under the ownership rule (file-source.ts), recording
 * what it applied in the data directory (config-record.ts). The reading,
 * validating and applying stay in those modules; this class is the order
 * they run in, and the log and the reload count an operator reads.
 */
import type { Logger } from 'pino';
import { formatFieldErrors } from '../domain/errors.js';
import type { CanopyConfig } from '../domain/spec.js';
import type { Store } from '../store/store.js';
import { watchConfigFile } from './config-file.js';
import { configKey } from './config-record.js';
import { applyStartConfig, recordConfig, type StartApplied, type StartConfig } from './config-start.js';
import { configFormatOf } from './config-text.js';
import { applyFileServices } from './file-source.js';

/** How one load of the file ended (canopy_config_reloads_total's `result`). */
export type ConfigLoadOutcome = 'success' | 'invalid' | 'store_error';

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
  /** Told how each load (at start and on every edit) ended. */
  readonly loaded: (outcome: ConfigLoadOutcome) => void;
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
    this.opts.loaded('success');
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

  /** Watches the file, if there is one, and applies each valid edit; returns a function that stops watching. */
  watch(): () => void {
    const file = this.opts.file;
    if (file === undefined) return () => {};
    const { logger, loaded } = this.opts;
    const digest = this.started?.digest;
    return watchConfigFile(
      file,
      {
        onValid: (config, digest) => {
          logger.info({ file, services: config.services.length }, 'config file parsed: applying');
          return this.reload(file, config, digest);
        },
        onWatchError: (err) =>
          logger.warn({ file, err }, 'config directory watch failed: edits are seen by polling only'),
        onParsing: (bytes) => logger.info({ file, bytes }, 'config file changed: parsing'),
        onInvalid: (errors) => {
          loaded('invalid');
          logger.error({ file, errors }, `config edit rejected, running config kept: ${formatFieldErrors(errors)}`);
        },
      },
      // The start read the file already: the watcher is not to read it again (a 100k-endpoint file is 9 MB).
      digest !== undefined ? { initialDigest: digest } : {},
    );
  }

  private reload(file: string, config: CanopyConfig, digest: string): Promise<void> {
    const { store, recordDir, logger, loaded } = this.opts;
    return applyFileServices(store, config.services).then(
      async (applied) => {
        if (recordDir !== undefined)
          await recordConfig(store, recordDir, configKey(digest, configFormatOf(file)), config);
        loaded('success');
        logger.info({ file, ...applySummary(applied) }, 'config reloaded');
      },
      (err: unknown) => {
        loaded('store_error');
        logger.error({ file, err }, 'config reload failed to write the store');
      },
    );
  }
}

/** What a load changed, as logged. */
export function applySummary(r: { replaced: readonly string[]; deleted: readonly string[]; unchanged: number }) {
  return { replaced: r.replaced.length, deleted: r.deleted.length, unchanged: r.unchanged };
}
