import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * JSON lines on stdout. Request payloads (rule contents, pushkeys, gateway
 * URLs) are never logged: only op, outcome, timings and correlation IDs.
 */
export function createLogger(level: string, name = 'matrix-push-worker'): Logger {
  return pino({ name, level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime });
}
