import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { inject } from 'vitest';
import type { Names } from './worker-harness.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

export interface WorkerProcess {
  readonly child: ChildProcess;
  /** Parsed JSON log lines seen so far. */
  readonly lines: Record<string, unknown>[];
  /** Where its `/healthz`, `/readyz` and `/metrics` answer. */
  readonly healthUrl: string;
}

/** Environment that points a worker process at a test's own queue and database. */
export function workerEnvironment(names: Names, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    AMQP_URL: names.amqp.url,
    MONGODB_URL: inject('mongoUrl'),
    MONGODB_DATABASE: names.database,
    RPC_QUEUE: names.amqp.queue,
    RPC_READ_QUEUE: names.amqp.readQueue,
    EVALUATE_QUEUE: `${names.amqp.queue}.evaluate`,
    DELIVERY_QUEUE: `${names.amqp.queue}.deliver`,
    // Few partition queues per test (each a quorum queue): enough to spread over a few workers.
    DELIVERY_PARTITIONS: '4',
    RPC_DEAD_LETTER_EXCHANGE: names.amqp.deadLetterExchange,
    RPC_DEAD_LETTER_QUEUE: names.amqp.deadLetterQueue,
    EVENTS_EXCHANGE: names.amqp.eventsExchange,
    LOG_LEVEL: 'debug',
    HEALTH_HOST: '127.0.0.1',
    HEALTH_PORT: '0',
    ...extra,
  };
}

/** Starts `src/main.ts` (through tsx) and resolves once it consumes. */
export async function startWorkerProcess(env: NodeJS.ProcessEnv): Promise<WorkerProcess> {
  return startServiceProcess('src/main.ts', env, 'worker started');
}

/**
 * Starts an entry point of `src/` (through tsx) and resolves once it logs
 * `readyMessage`. `healthUrl` is taken from its 'health and metrics
 * listening' line; `port` from the ready line, if it has one.
 */
export async function startServiceProcess(
  entry: string,
  env: NodeJS.ProcessEnv,
  readyMessage: string,
): Promise<WorkerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, unknown>[] = [];
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  let healthUrl = '';
  const started = new Promise<void>((resolve, reject) => {
    const reader = createInterface({ input: child.stdout });
    reader.on('line', (line) => {
      try {
        const parsed = JSON.parse(line) as Record<string, unknown>;
        lines.push(parsed);
        if (parsed['msg'] === 'health and metrics listening') healthUrl = `http://127.0.0.1:${String(parsed['port'])}`;
        if (parsed['msg'] === readyMessage) resolve();
      } catch {
        // not a log line
      }
    });
    child.once('exit', (code) => {
      reject(new Error(`${entry} exited with ${String(code)} before starting: ${stderr}`));
    });
  });
  await started;
  return { child, lines, healthUrl };
}

export async function stopWorkerProcess(
  worker: WorkerProcess,
  signal: NodeJS.Signals = 'SIGTERM',
): Promise<number | null> {
  // A process killed by a signal has no exit code, only a signal code.
  if (worker.child.exitCode !== null || worker.child.signalCode !== null) return worker.child.exitCode;
  const exited = once(worker.child, 'exit') as Promise<[number | null]>;
  worker.child.kill(signal);
  const [code] = await exited;
  return code;
}
