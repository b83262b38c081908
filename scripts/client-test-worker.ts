/**
 * One worker for a client's test suite (the Rust client's `cargo test`): the built worker
 * (`dist/main.js`) on queues, exchanges and a database of its own, against AMQP_URL and
 * MONGODB_URL, trusting the broker user of AMQP_URL and any push gateway on 127.0.0.1.
 *
 * Prints one JSON line on stdout once the worker serves: the names it uses. When stdin closes (the
 * test process ended, however it ended: its end of the pipe closes with it), stops the worker and
 * deletes its queues, exchanges and database, so that no run leaves a worker or quorum queues
 * behind. Its own messages and the worker's log go to stderr only if the worker fails.
 *
 *   node --import tsx scripts/client-test-worker.ts PREFIX
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import amqp from 'amqplib';
import { MongoClient } from 'mongodb';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const PARTITIONS = 4;
const START_TIMEOUT_MS = 90_000;
const STOP_TIMEOUT_MS = 30_000;

const prefix = process.argv[2];
if (prefix === undefined || !/^[a-z0-9.-]+$/.test(prefix)) {
  process.stderr.write('usage: client-test-worker.ts PREFIX (letters, digits, dots and dashes)\n');
  process.exit(2);
}
const amqpUrl = process.env['AMQP_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672';
const mongoUrl = process.env['MONGODB_URL'] ?? 'mongodb://127.0.0.1:27017';
// RabbitMQ refuses any other `user_id`; the worker trusts this one.
const publisher = decodeURIComponent(new URL(amqpUrl).username) || 'guest';

const names = {
  prefix,
  queue: prefix,
  read_queue: `${prefix}.read`,
  evaluate_queue: `${prefix}.evaluate`,
  deliver_queue: `${prefix}.deliver`,
  database: prefix.replaceAll('.', '_').replaceAll('-', '_'),
  publisher,
};
const exchanges = [`${prefix}.dlx`, `${prefix}.events`];
const queues = [
  names.queue,
  names.read_queue,
  names.evaluate_queue,
  names.deliver_queue,
  ...Array.from({ length: PARTITIONS }, (_, index) => `${names.deliver_queue}.p${String(index).padStart(3, '0')}`),
  `${prefix}.dead`,
];

const worker = spawn(process.execPath, ['dist/main.js'], {
  cwd: ROOT,
  env: {
    ...process.env,
    AMQP_URL: amqpUrl,
    MONGODB_URL: mongoUrl,
    MONGODB_DATABASE: names.database,
    RPC_QUEUE: names.queue,
    RPC_READ_QUEUE: names.read_queue,
    EVALUATE_QUEUE: names.evaluate_queue,
    DELIVERY_QUEUE: names.deliver_queue,
    DELIVERY_PARTITIONS: String(PARTITIONS),
    RPC_DEAD_LETTER_EXCHANGE: `${prefix}.dlx`,
    RPC_DEAD_LETTER_QUEUE: `${prefix}.dead`,
    EVENTS_EXCHANGE: `${prefix}.events`,
    TRUSTED_PUBLISHERS: publisher,
    // The tests' push gateway listens on 127.0.0.1, over plain HTTP.
    PUSH_GATEWAY_IP_ALLOWLIST: '127.0.0.1/32',
    ALLOW_INSECURE_PUSH_GATEWAYS: 'true',
    HEALTH_HOST: '127.0.0.1',
    HEALTH_PORT: '0',
    LOG_LEVEL: 'info',
  },
  stdio: ['ignore', 'pipe', 'pipe'],
});
// The last lines of its log, for when it fails.
const log: string[] = [];
const keep = (line: string): void => {
  log.push(line);
  if (log.length > 60) log.shift();
};
createInterface({ input: worker.stderr }).on('line', keep);
let ready = false;
let stopping = false;
const exited = once(worker, 'exit');

const started = new Promise<void>((resolve, reject) => {
  createInterface({ input: worker.stdout }).on('line', (line) => {
    keep(line);
    if (line.includes('"worker started"')) resolve();
  });
  void exited.then(() => {
    reject(new Error('the worker exited before it started'));
  });
  setTimeout(() => {
    reject(new Error(`the worker did not start within ${String(START_TIMEOUT_MS / 1000)} s`));
  }, START_TIMEOUT_MS).unref();
});
void exited.then(([code]: unknown[]) => {
  if (ready && !stopping) fail(`the worker exited (${String(code)}) while the tests ran`);
});

function fail(why: string): void {
  process.stderr.write(`client-test-worker: ${why}; its last lines:\n${log.join('\n')}\n`);
  process.exitCode = 1;
}

async function stopWorker(): Promise<void> {
  stopping = true;
  if (worker.exitCode !== null || worker.signalCode !== null) return;
  worker.kill('SIGTERM');
  const timer = setTimeout(() => worker.kill('SIGKILL'), STOP_TIMEOUT_MS);
  await exited;
  clearTimeout(timer);
}

/** What the worker declared, and its database: a broker left with many quorum queues runs out of file descriptors. */
async function deleteItsState(): Promise<void> {
  const connection = await amqp.connect(amqpUrl);
  try {
    for (const name of queues) {
      // A channel per deletion: a failed one closes the channel that asked.
      const channel = await connection.createChannel();
      channel.on('error', () => undefined);
      await channel.deleteQueue(name).catch(() => undefined);
      await channel.close().catch(() => undefined);
    }
    for (const name of exchanges) {
      const channel = await connection.createChannel();
      channel.on('error', () => undefined);
      await channel.deleteExchange(name).catch(() => undefined);
      await channel.close().catch(() => undefined);
    }
  } finally {
    await connection.close();
  }
  const mongo = new MongoClient(mongoUrl, { serverSelectionTimeoutMS: 10_000 });
  try {
    await mongo.db(names.database).dropDatabase();
  } finally {
    await mongo.close();
  }
}

try {
  await started;
  ready = true;
  process.stdout.write(`${JSON.stringify(names)}\n`);
  // Until the test process is gone.
  process.stdin.resume();
  await once(process.stdin, 'end');
} catch (error) {
  fail((error as Error).message);
} finally {
  await stopWorker();
  await deleteItsState().catch((error: unknown) => {
    process.stderr.write(`client-test-worker: could not delete ${prefix}'s queues or database: ${String(error)}\n`);
  });
}
