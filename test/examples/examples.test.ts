import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import amqp from 'amqplib';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { partitionQueue } from '../../src/consumer/notify-queue.js';
import { brokerUser } from '../integration/support/delivery-harness.js';
import { deleteTopology, uniqueNames, type Names } from '../integration/support/worker-harness.js';
import {
  startWorkerProcess,
  stopWorkerProcess,
  workerEnvironment,
  type WorkerProcess,
} from '../integration/support/worker-processes.js';

/**
 * Every file of examples/ runs as the README says (`node --import tsx
 * examples/<file>`) against a real worker process and the local push
 * gateway process (`npm run push-gateway:local`), on queues and a database
 * of this file's own, so that an example cannot rot. An example prints, as
 * its last line, the event ID of the notification it had delivered: the test
 * fails unless the gateway printed a line for that event.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const EXAMPLES = readdirSync(new URL('../../examples/', import.meta.url)).filter((file) => /\.m?[jt]s$/.test(file));
const PARTITIONS = 2;

interface GatewayProcess {
  readonly child: ChildProcess;
  readonly url: string;
  /** What it printed on stdout: one line per device notified. */
  readonly lines: string[];
}

let names: Names | undefined;
let worker: WorkerProcess | undefined;
let gateway: GatewayProcess | undefined;

/** What `beforeAll` started. */
function started(): { names: Names; gateway: GatewayProcess } {
  if (names === undefined || gateway === undefined) throw new Error('the worker and the gateway did not start');
  return { names, gateway };
}

beforeAll(async () => {
  // The examples import `matrix-push-worker/client` by name, which resolves to dist/ (package.json `exports`).
  execFileSync(process.execPath, [`${ROOT}node_modules/typescript/bin/tsc`, '-p', 'tsconfig.build.json'], {
    cwd: ROOT,
  });
  const unique = uniqueNames();
  names = unique;
  gateway = await startLocalPushGateway();
  worker = await startWorkerProcess(
    workerEnvironment(unique, {
      // What `npm run worker:local`'s development profile sets.
      TRUSTED_PUBLISHERS: brokerUser(),
      ALLOW_INSECURE_PUSH_GATEWAYS: 'true',
      PUSH_GATEWAY_IP_ALLOWLIST: '127.0.0.1/32',
      DELIVERY_PARTITIONS: String(PARTITIONS),
    }),
  );
});

afterAll(async () => {
  if (worker !== undefined) await stopWorkerProcess(worker, 'SIGKILL');
  if (gateway !== undefined && gateway.child.exitCode === null) {
    const exited = once(gateway.child, 'exit');
    gateway.child.kill('SIGKILL');
    await exited;
  }
  if (names === undefined) return;
  const { queue, database, amqp: broker } = names;
  await deleteTopology(names).catch(() => undefined);
  const connection = await amqp.connect(broker.url);
  const channel = await connection.createChannel();
  for (let partition = 0; partition < PARTITIONS; partition += 1) {
    await channel.deleteQueue(partitionQueue({ queue: `${queue}.deliver` }, partition));
  }
  await connection.close();
  const mongo = new MongoClient(inject('mongoUrl'));
  await mongo.db(database).dropDatabase();
  await mongo.close();
});

describe('examples/', () => {
  it('has examples', () => {
    expect(EXAMPLES).toContain('first-push.mts');
  });

  it.each(EXAMPLES)('%s runs, and the push gateway got the event ID it prints last', async (file) => {
    const { gateway } = started();
    const { code, stdout, stderr } = await run(file);
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    const eventId = stdout.trimEnd().split('\n').at(-1) ?? '';
    expect(eventId).toMatch(/^\$\S+$/);
    const seen = gateway.lines.filter((line) => line.includes(` notified event=${eventId} `));
    expect(seen, `the gateway printed:\n${gateway.lines.join('\n')}`).toHaveLength(1);
  });
});

async function run(file: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const { names, gateway } = started();
  const child = spawn(process.execPath, ['--import', 'tsx', `examples/${file}`], {
    cwd: ROOT,
    env: {
      ...process.env,
      AMQP_URL: names.amqp.url,
      AMQP_PUBLISHER_USER_ID: brokerUser(),
      RPC_QUEUE: names.amqp.queue,
      RPC_READ_QUEUE: names.amqp.readQueue,
      EVALUATE_QUEUE: `${names.queue}.evaluate`,
      DELIVERY_QUEUE: `${names.queue}.deliver`,
      PUSH_GATEWAY_URL: gateway.url,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

/** `npm run push-gateway:local` on a free port; resolves once it says where it listens. */
async function startLocalPushGateway(): Promise<GatewayProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/local-push-gateway-main.ts'], {
    cwd: ROOT,
    env: { ...process.env, LOCAL_PUSH_GATEWAY_PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => lines.push(line));
  const url = await new Promise<string>((resolve, reject) => {
    let stderr = '';
    createInterface({ input: child.stderr }).on('line', (line) => {
      stderr += `${line}\n`;
      const listening = /listening on (http:\/\/\S+)/.exec(line);
      if (listening?.[1] !== undefined) resolve(listening[1]);
    });
    child.once('exit', (code) => {
      reject(new Error(`the local push gateway exited with ${String(code)}: ${stderr}`));
    });
  });
  return { child, url, lines };
}
