import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openFaultWorld, type FaultWorld } from './support/fault-world.js';

const run = promisify(execFile);
let world: FaultWorld;

beforeAll(async () => {
  world = await openFaultWorld(1, { AMQP_HEARTBEAT_SECONDS: '7' });
});
afterAll(async () => {
  await world.close();
});

interface BrokerConnection {
  readonly timeout: number;
  readonly client_properties: unknown;
}

/** What the broker itself holds for each connection: its heartbeat timeout and client properties. */
async function brokerConnections(): Promise<BrokerConnection[]> {
  const { stdout } = await run(
    'rabbitmqctl',
    ['-q', 'list_connections', 'timeout', 'client_properties', '--formatter', 'json'],
    {
      env: { ...process.env, PATH: `${process.env['PATH'] ?? ''}:/usr/sbin` },
    },
  );
  return JSON.parse(stdout) as BrokerConnection[];
}

describe('AMQP_HEARTBEAT_SECONDS', () => {
  it("is the heartbeat the broker runs the worker's connection with", async () => {
    const pid = world.workers[0]?.child.pid;
    expect(pid).toBeDefined();
    const mine = (await brokerConnections()).filter((c) =>
      JSON.stringify(c.client_properties).includes(`:${String(pid)}`),
    );
    // Every connection of the worker (requests, delivery partitions, routing) runs with it.
    expect(mine.length).toBeGreaterThanOrEqual(1);
    expect(new Set(mine.map((c) => c.timeout))).toEqual(new Set([7]));
    console.log(
      `[fault: heartbeat] AMQP_HEARTBEAT_SECONDS=7 → the broker reports timeout ${String(mine[0]?.timeout)} s for the worker's connection`,
    );
  });
});
