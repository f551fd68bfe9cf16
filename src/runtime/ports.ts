import net from 'node:net';

export class PortBusyError extends Error {}

/** True when nothing is listening on host:port (we can bind it ourselves). */
export function portIsFree(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, host, () => s.close(() => resolve(true)));
  });
}

/**
 * Fails with one clear message when a port we are about to use is taken, naming the env var that moves it.
 * Checked before anything starts, so a busy port never leaves half the stack running.
 */
export async function ensurePortFree(port: number, what: string, envName: string, host = '127.0.0.1'): Promise<void> {
  if (port === 0) return;
  if (!(await portIsFree(port, host))) {
    throw new PortBusyError(
      `Port ${port} (${what}) is already in use on ${host}. ` +
        `Stop whatever listens there, or choose another port with ${envName}=<port>.`,
    );
  }
}
