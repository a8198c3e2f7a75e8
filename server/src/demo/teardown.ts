/**
 * What the demo started, stopped in reverse order exactly once: at the end of the run, on SIGINT or
 * SIGTERM while it runs (then the process exits 130 or 143), and, for a process that dies anyway, its
 * child processes are sent SIGKILL on exit so that no Envoy, etcd, replica or agent outlives the demo.
 * A second signal during the teardown stops waiting: the children get SIGKILL and the process exits.
 */
import type { ChildProcess } from 'node:child_process';

export class Teardown {
  private readonly steps: (() => Promise<void> | void)[] = [];
  private readonly children = new Set<ChildProcess>();
  private done: Promise<void> | undefined;
  private readonly onExit = () => {
    for (const c of this.children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  };
  private readonly onSignal = (signal: NodeJS.Signals) => {
    const code = signal === 'SIGINT' ? 130 : 143;
    if (this.done) {
      // A second Ctrl-C while tearing down: no more waiting, but no child left running either.
      this.onExit();
      process.exit(code);
    }
    void this.run().then(() => process.exit(code));
  };

  constructor() {
    process.once('exit', this.onExit);
  }

  /** Runs `step` at teardown (after every step added later). */
  add(step: () => Promise<void> | void): void {
    this.steps.push(step);
  }

  /** A child process that must not outlive the demo, even when it exits abruptly. */
  track(child: ChildProcess): void {
    this.children.add(child);
    child.once('exit', () => this.children.delete(child));
  }

  /** Until unwatchSignals(): SIGINT or SIGTERM tears everything down, then exits. */
  watchSignals(): void {
    this.unwatchSignals();
    process.on('SIGINT', this.onSignal);
    process.on('SIGTERM', this.onSignal);
  }

  unwatchSignals(): void {
    process.off('SIGINT', this.onSignal);
    process.off('SIGTERM', this.onSignal);
  }

  run(): Promise<void> {
    this.done ??= (async () => {
      this.watchSignals();
      for (const step of this.steps.reverse()) {
        try {
          await step();
        } catch (err) {
          process.stderr.write(`demo teardown: ${(err as Error).message}\n`);
        }
      }
      this.unwatchSignals();
      // A child no step stopped (one being started when a signal came): no later than now, and waited for
      // (2 s at most) so that what its exit cleans up (an Envoy's scratch directory) is cleaned up.
      const left = [...this.children];
      this.onExit();
      await Promise.race([
        Promise.all(left.map((c) => new Promise((resolve) => c.once('exit', resolve)))),
        new Promise((resolve) => setTimeout(resolve, 2000).unref()),
      ]);
      process.off('exit', this.onExit);
    })();
    return this.done;
  }
}
