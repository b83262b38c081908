import type { Logger } from '../logging/logger.js';

/** Where uncaught errors are reported: `process`, or an object literal in tests. */
export interface FatalErrorEvents {
  on(event: 'uncaughtException' | 'unhandledRejection', listener: (error: unknown) => void): unknown;
}

export interface FatalErrorOptions {
  readonly events: FatalErrorEvents;
  readonly log: Logger;
  readonly exit: (code: number) => void;
}

/**
 * An error nothing handled (an uncaught exception, a rejection nobody
 * awaited) leaves the process in a state nobody planned for: log it at
 * `fatal`, as a JSON line with the error, and exit 1 at once, without the
 * graceful shutdown. The orchestrator restarts the process; the broker
 * hands requests not yet acknowledged to another worker. Without this,
 * Node prints a bare stack to stderr, which log collectors do not parse.
 */
export function exitOnFatalErrors(options: FatalErrorOptions): void {
  const { events, log, exit } = options;
  const die = (event: string) => (error: unknown) => {
    try {
      log.fatal({ err: error, event }, 'unexpected error: exiting');
    } finally {
      exit(1);
    }
  };
  events.on('uncaughtException', die('uncaughtException'));
  events.on('unhandledRejection', die('unhandledRejection'));
}

/** `exitOnFatalErrors` on this process: what each process entry point installs first. */
export function handleFatalErrors(log: Logger): void {
  exitOnFatalErrors({ events: process, log, exit: (code) => process.exit(code) });
}
