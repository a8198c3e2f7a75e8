/** Waits for SIGINT or SIGTERM, then runs `stop` once. */
export function untilSignal(stop: () => Promise<void>): Promise<void> {
  return new Promise<void>((resolve) => {
    const onSignal = (): void => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      void stop().then(resolve);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}

/**
 * A process run under a wrapper that may die without passing a signal on (`npm start` killed with
 * SIGKILL) is left orphaned, reparented to init or a subreaper: it then stops as on SIGTERM. Polls the
 * parent pid (Linux has PR_SET_PDEATHSIG, which Node does not expose); the timer keeps nothing alive.
 */
export function stopWithParent(intervalMs = 500): void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    process.kill(process.pid, 'SIGTERM');
  }, intervalMs);
  timer.unref();
}
