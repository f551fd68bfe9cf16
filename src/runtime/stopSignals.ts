/**
 * Clean stop on SIGINT and SIGTERM for a process entry point (`npm run api`, `npm run worker`): the first signal runs
 * `stop` (which returns the process's credit leases, among others) and exits. One Ctrl-C often arrives twice (from
 * the terminal and forwarded by npm): a repeat within `graceMs` is ignored instead of killing the process half-way
 * through its stop, as Node's default handler would; a later one forces the exit.
 */
export function exitOnStopSignals(stop: () => Promise<void>, graceMs = 2000): void {
  let firstAt = 0;
  const onSignal = () => {
    if (firstAt) {
      if (Date.now() - firstAt > graceMs) {
        console.error('Forced exit.');
        process.exit(130);
      }
      return;
    }
    firstAt = Date.now();
    stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}
