import { describe, expect, it } from 'vitest';
import { backlogOfEvents } from './support/event-backlog.js';
import type { ContractReply } from './support/rpc-caller.js';
import { useWorkerPool } from './support/worker-pool.js';

/**
 * A pool whose workers are far behind on their change events: a write is
 * answered once its events are confirmed, so they wait on every worker's
 * event queue behind others', while the next request comes off another
 * queue at once. What the caller sends after the reply still sees the
 * write on every worker: a read answered from the read cache, and an
 * `evaluate` by the rules kept for evaluation, each wait until the
 * worker's event queue is applied up to them. (Delivery's pusher cache:
 * pusher-cache-lag.test.ts.)
 */
const WORKERS = 3;
const MASTER = { scope: 'global', kind: 'override', rule_id: '.m.rule.master' };

const pool = useWorkerPool(WORKERS, {
  // Long enough for the workers to be paused while a backlog of events is published.
  AMQP_HEARTBEAT_SECONDS: '120',
  // Rules kept for evaluation served for as long as those kept for reads: only the change events drop them.
  EVALUATE_MAX_STALENESS_MS: '600000',
});

/** What a request sent after the backlog may wait for: the worker going through it (seconds; more in CI). */
const BACKLOG_WAIT_MS = 120_000;

const enableMaster = async (user: string): Promise<ContractReply> =>
  pool.caller.call(
    pool.names.queue,
    { op: 'set_pushrule_enabled', user_id: user, ...MASTER, enabled: true },
    {},
    BACKLOG_WAIT_MS,
  );
const read = async (user: string): Promise<ContractReply> =>
  pool.caller.call(
    pool.names.amqp.readQueue,
    { op: 'get_pushrule_enabled', user_id: user, ...MASTER },
    {},
    BACKLOG_WAIT_MS,
  );
const evaluate = async (user: string): Promise<ContractReply> =>
  pool.caller.call(
    `${pool.names.queue}.evaluate`,
    {
      op: 'evaluate',
      event: {
        event_id: '$lag',
        type: 'm.room.message',
        room_id: '!room:example.org',
        sender: '@sender:example.org',
        content: { msgtype: 'm.text', body: 'hello' },
      },
      room: { member_count: 12, sender_power_level: 0, notification_power_levels: { room: 50 } },
      recipients: [{ user_id: user }],
    },
    {},
    BACKLOG_WAIT_MS,
  );

/** What `ask` answers on each worker: the queue's consumers take turns, so `2 ×` reaches every one. */
async function onEveryWorker(ask: () => Promise<ContractReply>): Promise<ContractReply[]> {
  const replies: ContractReply[] = [];
  for (let i = 0; i < 2 * WORKERS; i += 1) replies.push(await ask());
  return replies;
}

describe('a pool behind on its change events, after a write of push rules', () => {
  it("answers every read from a worker's cache with the write", async () => {
    const user = '@lagging-reader:example.org';
    await pool.caller.call(pool.names.queue, { op: 'get_pushrules', user_id: user });
    // Every worker keeps the user's rules (master disabled).
    expect(await onEveryWorker(async () => read(user))).toEqual(
      Array.from({ length: 2 * WORKERS }, () => ({ ok: true, body: { enabled: false } })),
    );
    await backlogOfEvents(pool.names, pool.workers, 'm.push_rules');
    expect(await enableMaster(user)).toEqual({ ok: true, body: {} });
    expect(await onEveryWorker(async () => read(user))).toEqual(
      Array.from({ length: 2 * WORKERS }, () => ({ ok: true, body: { enabled: true } })),
    );
  }, 300_000);

  it('evaluates every event by the rules the write stored: the master rule now silences the user', async () => {
    const user = '@lagging-recipient:example.org';
    await pool.caller.call(pool.names.queue, { op: 'get_pushrules', user_id: user });
    // Every worker keeps the user's compiled rules, by which a message notifies.
    expect(await onEveryWorker(async () => evaluate(user))).toEqual(
      Array.from({ length: 2 * WORKERS }, () => ({ ok: true, body: { notify: { [user]: ['notify'] }, evaluated: 1 } })),
    );
    await backlogOfEvents(pool.names, pool.workers, 'm.push_rules');
    expect(await enableMaster(user)).toEqual({ ok: true, body: {} });
    expect(await onEveryWorker(async () => evaluate(user))).toEqual(
      Array.from({ length: 2 * WORKERS }, () => ({ ok: true, body: { notify: {}, evaluated: 1 } })),
    );
  }, 300_000);
});
