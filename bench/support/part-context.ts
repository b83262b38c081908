import type { MongoClient } from 'mongodb';

/** What bench/run.ts hands every part that starts workers of its own. */
export interface PartContext {
  readonly amqpUrl: string;
  readonly mongo: MongoClient;
  /** The run's id, for queue and database names. */
  readonly id: string;
  /** A worker's environment: the default configuration on this queue (and the queues named after it) and database. */
  readonly childEnv: (queue: string, database: string) => NodeJS.ProcessEnv;
  /** Deletes the queues and exchanges `childEnv` names after `queue`. */
  readonly deleteQueues: (queue: string) => Promise<void>;
}

/** A part whose workers' CPU is shown next to the broker's and the store's. */
export interface WorkerPartContext extends PartContext {
  /** Extra node arguments of the workers (`--profile`). */
  readonly workerArgs: readonly string[];
  /** Other processes whose CPU is shown (the broker, the store). */
  readonly others: Readonly<Record<string, number | undefined>>;
}
