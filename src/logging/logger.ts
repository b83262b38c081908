import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/**
 * JSON lines on stdout (or `destination`: a worker thread's lines go to the
 * main thread, see `relayLine`). Request payloads (rule contents, pushkeys,
 * gateway URLs) are never logged: only op, outcome, timings and correlation
 * IDs.
 */
export function createLogger(level: string, name = 'matrix-push-worker', destination?: DestinationStream): Logger {
  const options = { name, level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime };
  return destination === undefined ? pino(options) : pino(options, destination);
}

/**
 * Writes a line another logger of the same setup made (a worker thread's,
 * already filtered by level and formatted) to where `log` writes: one
 * stream for the process, whatever the thread.
 */
export function relayLine(log: Logger, line: string): void {
  const stream = (log as unknown as Record<symbol, DestinationStream | undefined>)[pino.symbols.streamSym];
  stream?.write(line);
}
