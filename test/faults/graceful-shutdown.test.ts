import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logLines, openFaultWorld, type FaultWorld } from './support/fault-world.js';
import { runLoad, tally } from './support/load.js';

/**
 * SIGTERM a worker under load: it cancels its consumer, answers what it
 * holds, closes and exits 0; the broker sends everything else to the
 * other worker. No caller notices.
 */
const USER = '@term:example.org';
let world: FaultWorld;

beforeAll(async () => {
  world = await openFaultWorld(2);
  expect((await world.client.request({ op: 'get_pushrules', user_id: USER })).ok).toBe(true);
});
afterAll(async () => {
  await world.close();
});

describe('SIGTERM during load', () => {
  it('loses no request and leaves none unanswered', async () => {
    let running = true;
    const load = runLoad({
      client: world.client,
      concurrency: 16,
      timeoutMs: 8_000,
      retry: false,
      running: () => running,
      next: (i) => ({
        user: USER,
        messageId: `term-${i}`,
        // Every write sets actions no earlier one set, so each is a change
        // and bumps the version once (a write that changes nothing does not).
        body:
          i % 4 === 0
            ? {
                op: 'set_pushrule_actions',
                user_id: USER,
                scope: 'global',
                kind: 'override',
                rule_id: '.m.rule.master',
                actions: [{ set_tweak: 'sound', value: `term-${i}` }],
              }
            : {
                op: 'get_pushrule_enabled',
                user_id: USER,
                scope: 'global',
                kind: 'override',
                rule_id: '.m.rule.master',
              },
      }),
    });
    await sleep(1_500);
    const [victim] = world.workers;
    if (victim === undefined) throw new Error('no worker');
    const exited = once(victim.child, 'exit') as Promise<[number | null, string | null]>;
    const stoppedAt = Date.now();
    victim.child.kill('SIGTERM');
    const [code] = await exited;
    const stopMs = Date.now() - stoppedAt;
    await sleep(1_000);
    running = false;
    const outcomes = await load;

    expect(code).toBe(0);
    expect(tally(outcomes.map((o) => o.outcome))).toEqual({ ok: outcomes.length });
    const stopping = victim.lines.find((l) => l['msg'] === 'stopping: finishing requests in flight');
    expect(victim.lines.some((l) => l['msg'] === 'worker closed')).toBe(true);
    // Everything the stopping worker started, it finished: no request was
    // served twice. (Deliveries that reach amqplib while the cancel is under
    // way are never started by it; the broker gives them to the other worker.)
    const served = logLines(world, 'request served').map((l) => l['correlationId']);
    expect(served.length - new Set(served).size).toBe(0);
    const redeliveredAfterStop = logLines(world, 'request served').filter((l) => l['redelivered'] === true).length;
    const writes = outcomes.filter((o) => o.request.body['op'] === 'set_pushrule_actions').length;
    expect((await world.stored(USER)).version).toBe(1 + writes);
    console.info(
      `[fault: SIGTERM] ${outcomes.length} requests (${writes} writes), all answered ok; ` +
        `${String(stopping?.['inFlight'])} in flight at the signal, worker exited 0 after ${stopMs} ms; ${redeliveredAfterStop} not yet started by it were redelivered to the other worker`,
    );
  });
});
