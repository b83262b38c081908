/**
 * The isolation scenario's load: `evaluate` requests sent on a timer (an
 * open loop) from a process of its own, so that building and reading
 * 10,000-recipient messages does not stall the event loop of the process
 * that times the other requests.
 *
 * Environment: AMQP_URL, EVALUATE_QUEUE, SENDER_RATE (per second),
 * SENDER_RECIPIENTS, SENDER_PREFIX, SENDER_DURATION_MS,
 * SENDER_MEASURE_FROM_MS / SENDER_MEASURE_TO_MS (the sends that count),
 * SENDER_TIMEOUT_MS (each request's deadline), SENDER_RESULT_FILE (the
 * figures, as JSON). Sends one request to warm the
 * worker's cache, prints `ready`, starts its schedule at once, and exits
 * when every request sent has settled.
 */
import { writeFileSync } from 'node:fs';
import { PushRulesClient } from '../src/client/push-rules-client.js';
import { evaluateEvent, evaluateRoom, recipientsOf, runOpenLoop } from './support/evaluate-load.js';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is not set`);
  return value;
};

const client = new PushRulesClient({
  url: process.env['AMQP_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672',
  evaluateQueue: env('EVALUATE_QUEUE'),
  timeoutMs: Number(process.env['SENDER_TIMEOUT_MS'] ?? 15_000),
});
const recipients = recipientsOf(env('SENDER_PREFIX'), Number(env('SENDER_RECIPIENTS')));
const room = evaluateRoom(recipients.length);
await client.evaluate(evaluateEvent(0), room, recipients);
console.log('ready');
const result = await runOpenLoop({
  ratePerSecond: Number(env('SENDER_RATE')),
  durationMs: Number(env('SENDER_DURATION_MS')),
  measureFromMs: Number(env('SENDER_MEASURE_FROM_MS')),
  measureToMs: Number(env('SENDER_MEASURE_TO_MS')),
  call: async (i) => client.evaluate(evaluateEvent(i + 1), room, recipients),
});
writeFileSync(env('SENDER_RESULT_FILE'), JSON.stringify(result));
await client.close();
process.exit(0);
