/**
 * The IPC side of a bench target process: start, report {type:'ready', url}, answer {type:'stats'} with the
 * target's own counters, and stop cleanly on {type:'shutdown'} (or when the parent goes away).
 */
export interface Started {
  url: string;
  stats?: () => unknown;
  close(): Promise<void>;
}

export function serveTarget(start: () => Promise<Started>): void {
  const send = (m: unknown) => process.send?.(m);
  start().then((t) => {
    let stopping = false;
    const stop = () => {
      if (stopping) return;
      stopping = true;
      t.close().then(() => process.exit(0), (e) => {
        console.error(`close failed: ${e instanceof Error ? e.message : String(e)}`);
        process.exit(1);
      });
    };
    process.on('message', (m: any) => {
      if (m?.type === 'stats') send({ type: 'stats', stats: t.stats?.() ?? null });
      else if (m?.type === 'shutdown') stop();
    });
    process.on('disconnect', stop);
    process.on('SIGTERM', stop);
    send({ type: 'ready', url: t.url });
  }, (e) => {
    send({ type: 'error', message: e instanceof Error ? e.message : String(e) });
    console.error(e);
    process.exit(1);
  });
}
