/** What the worker reports about each request it settles, for metrics. */
export interface RequestReport {
  /** The request's op, or `unknown` when the body did not name a valid one. */
  readonly op: string;
  /** Which queue it came from: `request`, `read` or `evaluate` (the role, not the configured name). */
  readonly queue: string;
  /** `ok`, an error kind, `expired` or `dead-lettered`. */
  readonly outcome: string;
  readonly seconds: number;
  readonly conflicts: number;
  readonly redelivered: boolean;
  readonly replayed: boolean;
  /** A write served without changing anything (see `HandleOutcome.unchanged`). */
  readonly unchanged: boolean;
  /** Answered Unavailable because its deadline came before the store had served it (see `HandleOutcome.deadlinePassed`). */
  readonly deadlinePassed: boolean;
}

/** Narrow hooks a metrics registry implements; tests pass object literals. */
export interface WorkerObserver {
  requestSettled(report: RequestReport): void;
  reconnected(): void;
  /** Connected to the node `broker` (`host:port`). */
  brokerConnected?(broker: string): void;
  /** The connection to `broker` was lost. */
  brokerLost?(broker: string): void;
}

export const NO_OBSERVER: WorkerObserver = { requestSettled: () => undefined, reconnected: () => undefined };
