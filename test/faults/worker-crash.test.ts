import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logLines, openFaultWorld, type FaultWorld } from './support/fault-world.js';
import { runLoad, tally } from './support/load.js';

/**
 * SIGKILL one of three workers while writes stream in. The broker hands
 * its unacknowledged requests to the other two; with a messageId on every
 * write, one that was applied before the kill is answered from the record.
 */
const USERS = Array.from({ length: 6 }, (_, i) => `@crash${i}:example.org`);
let world: FaultWorld;

beforeAll(async () => {
  world = await openFaultWorld(3);
  for (const user of USERS) expect((await world.client.request({ op: 'get_pushrules', user_id: user })).ok).toBe(true);
});
afterAll(async () => {
  await world.close();
});

describe('a worker killed under load', () => {
  it('every write is answered by another worker, and every acknowledged write is stored exactly once', async () => {
    let running = true;
    const load = runLoad({
      client: world.client,
      concurrency: 12,
      timeoutMs: 8_000,
      retry: false,
      running: () => running,
      next: (i) => {
        const user = USERS[i % USERS.length] ?? '';
        const ruleId = `!w${i}:example.org`;
        return {
          user,
          messageId: `crash-${i}`,
          body: {
            op: 'set_pushrule',
            user_id: user,
            scope: 'global',
            kind: 'room',
            rule_id: ruleId,
            rule: { actions: ['notify'] },
          },
        };
      },
    });
    await sleep(1_500);
    const victim = world.workers[0];
    const servedBeforeKill = victim?.lines.filter((l) => l['msg'] === 'request served').length;
    victim?.child.kill('SIGKILL');
    const killedAt = Date.now();
    await sleep(2_500);
    running = false;
    const outcomes = await load;

    const counts = tally(outcomes.map((o) => o.outcome));
    // A caller only ever times out once its deadline (= its timeout) passed.
    for (const o of outcomes.filter((x) => x.outcome === 'timeout'))
      expect(o.doneAt - o.sentAt).toBeGreaterThanOrEqual(o.timeoutMs);
    expect(counts).toEqual({ ok: outcomes.length });

    const redelivered = logLines(world, 'request served').filter((l) => l['redelivered'] === true);
    const slowest = Math.max(
      ...outcomes.filter((o) => o.sentAt < killedAt && o.doneAt > killedAt).map((o) => o.doneAt - o.sentAt),
    );
    for (const user of USERS) {
      const acknowledged = outcomes.filter((o) => o.request.user === user).map((o) => o.request.body['rule_id']);
      const stored = await world.stored(user);
      expect(new Set(stored.ruleIds)).toEqual(new Set(acknowledged));
      expect(stored.ruleIds).toHaveLength(acknowledged.length);
      // get_pushrules stored version 1; each write bumps it once, replays never.
      expect(stored.version).toBe(1 + acknowledged.length);
    }
    console.info(
      `[fault: SIGKILL] ${outcomes.length} writes, all answered ok; ${redelivered.length} redelivered to survivors ` +
        `(${redelivered.filter((l) => l['replayed'] === true).length} already applied, answered from the record); ` +
        `slowest request spanning the kill ${slowest} ms; victim had served ${String(servedBeforeKill)} before`,
    );
  });
});
