import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, expect, inject } from 'vitest';
import { RpcCaller } from './rpc-caller.js';
import { deleteTopology, uniqueNames, type Names } from './worker-harness.js';
import { startWorkerProcess, stopWorkerProcess, workerEnvironment, type WorkerProcess } from './worker-processes.js';

/** A file's pool of worker processes on queues and a database of its own, and a caller. */
export interface WorkerPool {
  readonly names: Names;
  readonly workers: readonly WorkerProcess[];
  readonly caller: RpcCaller;
}

/**
 * Starts `count` worker processes (`src/main.ts`, with `env` on top of
 * `workerEnvironment`) before the file's tests; after them, stops each
 * with SIGTERM (each must exit 0), deletes the queues and drops the
 * database. Call at the top level.
 */
export function useWorkerPool(count: number, env: Record<string, string> = {}): WorkerPool {
  const opened: { names?: Names; workers: WorkerProcess[]; caller?: RpcCaller } = { workers: [] };
  beforeAll(async () => {
    const names = uniqueNames();
    opened.names = names;
    const environment = workerEnvironment(names, env);
    opened.workers = await Promise.all(Array.from({ length: count }, async () => startWorkerProcess(environment)));
    opened.caller = await RpcCaller.open(names.amqp.url);
  });
  afterAll(async () => {
    await opened.caller?.close();
    const codes = await Promise.all(opened.workers.map(async (w) => stopWorkerProcess(w)));
    expect(codes).toEqual(opened.workers.map(() => 0));
    if (opened.names === undefined) return;
    await deleteTopology(opened.names);
    const mongo = await MongoClient.connect(inject('mongoUrl'));
    await mongo.db(opened.names.database).dropDatabase();
    await mongo.close();
  });
  const required = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`the worker pool's ${what} is used before beforeAll opened it`);
    return value;
  };
  return {
    get names() {
      return required(opened.names, 'names');
    },
    get workers() {
      return opened.workers;
    },
    get caller() {
      return required(opened.caller, 'caller');
    },
  };
}
