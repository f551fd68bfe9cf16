import pino from 'pino';

/** Structured JSON logs (pino: the fastest mainstream Node JSON logger, no formatting on the hot path). */
export type Logger = pino.Logger;
export function createLogger(level = process.env.LOG_LEVEL ?? 'info', name = 'gateway'): Logger {
  return pino({ name, level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime });
}
