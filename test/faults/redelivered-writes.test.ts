import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stopWorkerProcess } from '../integration/support/worker-processes.js';
import { awaitLogLines, openFaultWorld, type FaultWorld } from './support/fault-world.js';

/**
 * A genuine redelivery: the first worker applies a write and dies before
 * it replies or acknowledges (test-only fault injection), so the broker
 * delivers the request again, flagged redelivered, to the next worker. With
 * the same messageId that worker answers from the record: the write is
 * applied once, and the caller gets the reply it would have got.
 */
const USER = '@redeliver:example.org';
let world: FaultWorld;

beforeAll(async () => {
  world = await openFaultWorld(0);
  const healthy = await world.startWorker();
  expect((await world.client.request({ op: 'get_pushrules', user_id: USER })).ok).toBe(true);
  const room = { op: 'set_pushrule', user_id: USER, scope: 'global', kind: 'room', rule: { actions: ['notify'] } };
  expect(await world.client.request({ ...room, rule_id: '!doomed:example.org' })).toEqual({ ok: true, body: {} });
  // From here on, requests reach the worker that crashes after applying.
  // Stopped gracefully: a worker acknowledges a write only after the broker
  // confirmed its change event, a moment after the reply; killed at once, it
  // could leave the write to be redelivered to the crashing worker.
  await stopWorkerProcess(healthy, 'SIGTERM');
});
afterAll(async () => {
  await world.close();
});

describe('a write redelivered after the worker applied it', () => {
  it.each([
    [
      'set_pushrule',
      { op: 'set_pushrule', scope: 'global', kind: 'room', rule_id: '!new:example.org', rule: { actions: ['notify'] } },
      ['!doomed:example.org', '!new:example.org'],
    ],
    [
      'delete_pushrule',
      { op: 'delete_pushrule', scope: 'global', kind: 'room', rule_id: '!doomed:example.org' },
      ['!new:example.org'],
    ],
  ])('%s is applied once and answered as if nothing happened', async (op, body, expectedRules) => {
    const before = await world.stored(USER);
    const crashing = await world.startWorker({ FAULT_CRASH_AFTER_APPLY_ON_USER_ID: USER });
    const reply = world.client.request({ ...body, user_id: USER }, { messageId: `redeliver-${op}`, timeoutMs: 30_000 });
    await new Promise((resolve) => crashing.child.once('exit', resolve));
    const afterCrash = await world.stored(USER);
    expect(afterCrash.version).toBe(before.version + 1);

    const successor = await world.startWorker();
    expect(await reply).toEqual({ ok: true, body: {} });
    const stored = await world.stored(USER);
    expect(stored.version).toBe(before.version + 1);
    expect(stored.ruleIds.sort()).toEqual(expectedRules);
    const served = await awaitLogLines(world, 'request served', (l) => l['op'] === op && l['redelivered'] === true);
    expect(served).toMatchObject([{ replayed: true }]);
    // Gracefully, for the same reason: the replay's ack must not be left for the next crashing worker.
    await stopWorkerProcess(successor, 'SIGTERM');
    console.info(
      `[fault: redelivery] ${op}: applied by the crashing worker (version ${before.version} → ${afterCrash.version}), redelivered, answered from the record, version unchanged`,
    );
  });
});
