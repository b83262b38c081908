import { describe, expect, it } from 'vitest';
import type { ContractReply } from './support/rpc-caller.js';
import { useWorkerPool } from './support/worker-pool.js';

/**
 * Reads answered from each worker's read cache, across a pool: a write
 * answered by one worker is read back at once from every worker, which all
 * had the user's old rules in memory. Each read goes to the read queue, whose
 * consumers take turns, so the reads after a write land on every worker.
 */
const WORKERS = 3;
const USERS = Array.from({ length: 6 }, (_, i) => `@cached${String(i)}:example.org`);
const ROUNDS = 25;
const MASTER = { scope: 'global', kind: 'override', rule_id: '.m.rule.master' };

const pool = useWorkerPool(WORKERS);

const write = async (user: string, enabled: boolean): Promise<ContractReply> =>
  pool.caller.call(pool.names.queue, { op: 'set_pushrule_enabled', user_id: user, ...MASTER, enabled });
const read = async (user: string): Promise<ContractReply> =>
  pool.caller.call(pool.names.amqp.readQueue, { op: 'get_pushrule_enabled', user_id: user, ...MASTER });

describe('the read cache across a pool', () => {
  it('every worker answers a read sent after a write with what the write stored', async () => {
    for (const user of USERS) {
      await pool.caller.call(pool.names.queue, { op: 'get_pushrules', user_id: user });
      // Each worker now keeps the user's rules (master disabled).
      for (let i = 0; i < 2 * WORKERS; i += 1) expect(await read(user)).toEqual({ ok: true, body: { enabled: false } });
    }
    const stale: string[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const enabled = round % 2 === 0;
      await Promise.all(
        USERS.map(async (user) => {
          expect(await write(user, enabled)).toEqual({ ok: true, body: {} });
          for (let i = 0; i < WORKERS; i += 1) {
            const reply = await read(user);
            if (JSON.stringify(reply) !== JSON.stringify({ ok: true, body: { enabled } }))
              stale.push(`${user} round ${String(round)}: ${JSON.stringify(reply)}`);
          }
        }),
      );
    }
    expect(stale).toEqual([]);
  });
});
