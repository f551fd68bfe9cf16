import pino from 'pino';
import { LineBatch } from './lineBatch';

/**
 * Structured JSON logs (pino), `time` in epoch milliseconds (cheaper to format than an ISO string). Writes are
 * batched and asynchronous, since a synchronous write per request line is a tenth of the gateway's CPU under load
 * (docs/benchmarks.md): lines are collected in memory (LineBatch) and handed to sonic-boom 16 KB at a time, one write
 * syscall per ~60 lines. The batch is flushed every second and on exit, so lines are not lost on shutdown.
 */
export type Logger = pino.Logger;

let dest: LineBatch | null = null;
let override: pino.DestinationStream | null = null;

/**
 * Sends the lines of every logger created afterwards, the Temporal runtime's included (redirectedLines), to
 * `stream`: tests keep them in memory and show them only when a test fails.
 */
export function logTo(stream: pino.DestinationStream | null): void {
  override = stream;
}

/** Where other loggers' text lines go while logTo is in force; null: to their own default place. */
export function redirectedLines(): ((line: string) => void) | null {
  const stream = override;
  return stream ? (line) => stream.write(line) : null;
}

export function createLogger(level = process.env.LOG_LEVEL ?? 'info', name = 'gateway'): Logger {
  if (override)
    return pino({ name, level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.epochTime }, override);
  if (!dest) {
    const d = new LineBatch(pino.destination({ dest: 1, sync: false }));
    dest = d;
    // Low traffic must not leave lines sitting in the buffer.
    setInterval(() => {
      try {
        d.flush();
      } catch {}
    }, 1000).unref();
    process.once('exit', () => {
      try {
        d.flushSync();
      } catch {}
    });
  }
  return pino({ name, level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.epochTime }, dest);
}
