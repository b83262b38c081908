/**
 * The worker and the gateway scripts/check-dashboard.ts starts when it is
 * given none to scrape: src/ through tsx, on queues, exchanges and a database
 * of their own, and the traffic that gives the dashboard's panels something
 * to show.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import amqp from 'amqplib';
import { MongoClient } from 'mongodb';
import { PushRulesClient } from '../../src/client/push-rules-client.js';
import { PushGatewayDouble } from '../../test/support/push-gateway-double.js';
import { cleanups, stop } from './cleanups.js';
import { log } from './log.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** How long a worker or gateway of its own may take to be ready. */
const STARTUP_MS = 60_000;

interface Started {
  readonly child: ChildProcess;
  readonly metrics: string;
  readonly port?: number;
}

/** Starts `entry` through tsx and resolves once it logs `ready`, with where its metrics answer. */
async function startProcess(entry: string, env: NodeJS.ProcessEnv, ready: string): Promise<Started> {
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  cleanups.push(async () => stop(child));
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return new Promise<Started>((resolve, reject) => {
    let metrics = '';
    createInterface({ input: child.stdout }).on('line', (line) => {
      let parsed: Record<string, unknown>;
      try {
        parsed = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      if (parsed['msg'] === 'health and metrics listening') metrics = `127.0.0.1:${String(parsed['port'])}`;
      if (parsed['msg'] === ready)
        resolve({ child, metrics, ...(typeof parsed['port'] === 'number' ? { port: parsed['port'] } : {}) });
    });
    child.once('exit', (code) => {
      reject(new Error(`${entry} exited with ${String(code)} before it was ready: ${stderr}`));
    });
    setTimeout(() => {
      reject(
        new Error(
          `${entry} was not ready within ${STARTUP_MS / 1000} s (are the broker and the database up?) ${stderr}`,
        ),
      );
    }, STARTUP_MS).unref();
  });
}

/** A worker and a gateway on queues and a database of their own, and the traffic to send them. */
export async function startOwnProcesses(): Promise<{
  worker: Started;
  gateway: Started;
  traffic: () => Promise<void>;
}> {
  const amqpUrl = process.env['AMQP_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672';
  const mongoUrl = process.env['MONGODB_URL'] ?? 'mongodb://127.0.0.1:27017';
  const id = randomUUID().slice(0, 8);
  const queue = `check-dashboard.${id}`;
  const names = {
    queue,
    readQueue: `${queue}.read`,
    evaluateQueue: `${queue}.evaluate`,
    deliverQueue: `${queue}.deliver`,
    deadLetterQueue: `${queue}.dead`,
    deadLetterExchange: `${queue}.dlx`,
    eventsExchange: `${queue}.events`,
    database: `check_dashboard_${id}`,
  };
  cleanups.push(async () => deleteOwnState(amqpUrl, mongoUrl, names));
  const common = {
    ...process.env,
    AMQP_URL: amqpUrl,
    RPC_QUEUE: queue,
    RPC_READ_QUEUE: names.readQueue,
    HEALTH_HOST: '127.0.0.1',
    HEALTH_PORT: '0',
    LOG_LEVEL: 'info',
  };
  // notify messages are delivered to a gateway double: the worker trusts this broker user and lets 127.0.0.1 in.
  const pushGateway = await PushGatewayDouble.start();
  cleanups.push(async () => pushGateway.close());
  const brokerUser = decodeURIComponent(new URL(amqpUrl).username) || 'guest';
  log(`starting a worker and a gateway on ${queue} and database ${names.database}`);
  const worker = await startProcess(
    'src/main.ts',
    {
      ...common,
      MONGODB_URL: mongoUrl,
      MONGODB_DATABASE: names.database,
      EVALUATE_QUEUE: names.evaluateQueue,
      DELIVERY_QUEUE: names.deliverQueue,
      TRUSTED_PUBLISHERS: brokerUser,
      PUSH_GATEWAY_IP_ALLOWLIST: '127.0.0.1/32',
      ALLOW_INSECURE_PUSH_GATEWAYS: 'true',
      RPC_DEAD_LETTER_QUEUE: names.deadLetterQueue,
      RPC_DEAD_LETTER_EXCHANGE: names.deadLetterExchange,
      EVENTS_EXCHANGE: names.eventsExchange,
    },
    'worker started',
  );
  const tokens = join(mkdtempSync(join(tmpdir(), 'check-dashboard-tokens-')), 'tokens.json');
  writeFileSync(tokens, JSON.stringify({ 'check-token': '@check:example.org', 'other-token': '@other:example.org' }));
  const gateway = await startProcess(
    'src/gateway-main.ts',
    {
      ...common,
      // The worker trusts only this publisher (for notify): the gateway publishes as it.
      AMQP_PUBLISHER_USER_ID: brokerUser,
      AUTH_KIND: 'token-file',
      AUTH_TOKEN_FILE: tokens,
      GATEWAY_HOST: '127.0.0.1',
      GATEWAY_PORT: '0',
      GATEWAY_RATE_LIMIT_WRITES_PER_SECOND: '5',
      GATEWAY_RATE_LIMIT_BURST: '5',
    },
    'gateway listening',
  );
  const http = `http://127.0.0.1:${String(gateway.port)}/_matrix/client/v3`;
  const call = async (token: string, method: string, path: string, body?: unknown) => {
    const response = await fetch(`${http}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    await response.arrayBuffer();
  };
  const traffic = async () => {
    const client = new PushRulesClient({
      url: amqpUrl,
      queue,
      readQueue: names.readQueue,
      evaluateQueue: names.evaluateQueue,
      deliverQueue: names.deliverQueue,
      publisherUserId: brokerUser,
    });
    try {
      // Devices to push to: two phones on the double, and an e-mail pusher (skipped, and counted).
      for (const pushkey of ['phone-1', 'phone-2'])
        await call('check-token', 'POST', '/pushers/set', {
          kind: 'http',
          app_id: 'org.example.check',
          pushkey,
          app_display_name: 'Check',
          device_display_name: pushkey,
          lang: 'en',
          data: { url: pushGateway.notifyUrl },
        });
      await call('check-token', 'POST', '/pushers/set', {
        kind: 'email',
        app_id: 'm.email',
        pushkey: 'check@example.org',
        app_display_name: 'E-mail',
        device_display_name: 'check@example.org',
        lang: 'en',
        data: {},
      });
      // The first request is answered 503 and retried: a failure outcome too.
      pushGateway.behave({ kind: 'status', status: 503 }, { times: 1 });
      for (let round = 0; round < 10; round += 1) {
        const token = round % 2 === 0 ? 'check-token' : 'other-token';
        await call(token, 'GET', '/pushrules/');
        await call(token, 'PUT', `/pushrules/global/content/word-${round}`, {
          pattern: `word${round}`,
          actions: ['notify'],
        });
        await call(token, 'PUT', '/pushrules/global/override/.m.rule.master/enabled', { enabled: false });
        await call(token, 'GET', '/pushrules/global/content/missing');
        await call(token, 'GET', '/pushers');
        await client.evaluate(
          {
            event_id: `$e${round}`,
            type: 'm.room.message',
            room_id: '!room:example.org',
            sender: '@sender:example.org',
            content: { msgtype: 'm.text', body: `word${round} and more` },
          },
          { member_count: 3 },
          [{ user_id: '@check:example.org' }, { user_id: '@other:example.org' }, { user_id: '@nobody:example.org' }],
        );
        await client.notify(
          {
            event_id: `$e${round}`,
            room_id: '!room:example.org',
            type: 'm.room.message',
            sender: '@sender:example.org',
            content: { msgtype: 'm.text', body: `word${round} and more` },
          },
          [{ user_id: '@check:example.org', actions: ['notify'], counts: { unread: round + 1 } }],
        );
        await sleep(300);
      }
    } finally {
      await client.close();
    }
  };
  return { worker, gateway, traffic };
}

async function deleteOwnState(
  amqpUrl: string,
  mongoUrl: string,
  names: {
    queue: string;
    readQueue: string;
    evaluateQueue: string;
    deliverQueue: string;
    deadLetterQueue: string;
    deadLetterExchange: string;
    eventsExchange: string;
    database: string;
  },
): Promise<void> {
  const connection = await amqp.connect(amqpUrl);
  const channel = await connection.createChannel();
  for (const queue of [names.queue, names.readQueue, names.evaluateQueue, names.deliverQueue, names.deadLetterQueue])
    await channel.deleteQueue(queue);
  for (const exchange of [names.deadLetterExchange, names.eventsExchange]) await channel.deleteExchange(exchange);
  await connection.close();
  const mongo = new MongoClient(mongoUrl, { serverSelectionTimeoutMS: 5_000 });
  await mongo.db(names.database).dropDatabase();
  await mongo.close();
}
