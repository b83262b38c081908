import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { PartitionCountMismatchError } from '../../src/delivery-service/partition-count-guard.js';
import { DeliveryHost } from '../../src/delivery-thread/delivery-host.js';
import type { Config } from '../../src/config/config-schema.js';
import { DEFAULT_CONFIG } from '../support/default-config.js';
import { eventually } from '../support/eventually.js';

const SCRIPTED = new URL('./support/scripted-delivery-thread.ts', import.meta.url);
const hosts: DeliveryHost[] = [];

/** A host of the scripted thread doing `script` (its delivery queue's name), and every line logged. */
function aHost(script: string, overrides: Partial<Config['delivery']> = {}) {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line !== '') lines.push(JSON.parse(line) as never);
      done();
    },
  });
  const host = new DeliveryHost({
    config: { ...DEFAULT_CONFIG, delivery: { ...DEFAULT_CONFIG.delivery, queue: script, ...overrides } },
    logger: pino({ name: 'matrix-push-worker', level: 'info' }, sink),
    threadUrl: SCRIPTED,
    restartDelayMs: 20,
  });
  hosts.push(host);
  return { host, lines };
}

afterEach(async () => {
  await Promise.all(hosts.splice(0).map(async (host) => host.close()));
});

describe('DeliveryHost', () => {
  it('is ready once the thread started and consumes, and relays its log lines tagged with the thread', async () => {
    const { host, lines } = aHost('start', { partitions: 16 });
    expect(host.ready).toBe(false);
    await host.start(new AbortController().signal);
    expect(host.ready).toBe(true);
    await eventually(() => {
      expect(host.consuming).toBe(true);
    });
    expect(lines).toContainEqual(
      expect.objectContaining({
        name: 'matrix-push-worker',
        level: 30,
        thread: 'delivery',
        partitions: 16,
        msg: 'delivery started',
        pid: process.pid,
      }),
    );
  });

  it("answers a scrape with the thread's registry", async () => {
    const { host } = aHost('start');
    await host.start(new AbortController().signal);
    const metrics = await host.metrics();
    expect(metrics.map((family) => family.name)).toEqual([
      'push_worker_delivery_requests_total',
      'push_worker_requests_total',
    ]);
  });

  it('closes delivery in the thread before ending it, once however often it is asked', async () => {
    const { host, lines } = aHost('start');
    await host.start(new AbortController().signal);
    await Promise.all([host.close(), host.close()]);
    await host.close();
    expect(lines.filter((line) => line['msg'] === 'closing delivery')).toHaveLength(1);
    expect(host.ready).toBe(false);
    expect(await host.metrics()).toEqual([]);
  });

  it('fails the start with the partition count mismatch the thread met, as its own class', async () => {
    const { host } = aHost('mismatch');
    const starting = host.start(new AbortController().signal);
    await expect(starting).rejects.toBeInstanceOf(PartitionCountMismatchError);
    await expect(starting).rejects.toThrow('delivery.partitions is 8 here');
    expect(host.ready).toBe(false);
  });

  it('fails the start when the thread ends before it started', async () => {
    const { host } = aHost('exit');
    await expect(host.start(new AbortController().signal)).rejects.toThrow('the delivery thread exited (code 3)');
  });

  it('stops waiting for the start when the worker stops', async () => {
    const { host } = aHost('exit');
    const stop = new AbortController();
    stop.abort();
    await expect(host.start(stop.signal)).resolves.toBeUndefined();
  });

  it('logs a thread that fails after it started with its error, answers the scrape without it, and starts another', async () => {
    const { host, lines } = aHost('crash-on-scrape');
    await host.start(new AbortController().signal);
    expect(await host.metrics()).toEqual([]);
    await eventually(() => {
      expect(lines).toContainEqual(
        expect.objectContaining({
          level: 50,
          thread: 'delivery',
          msg: 'the delivery thread stopped; starting another (its partitions are taken again once their leases lapse)',
          err: expect.objectContaining({ message: 'thrown by the scripted delivery thread' }) as unknown,
        }),
      );
    });
    expect(host.restarts).toBe(1);
    await eventually(() => {
      expect(host.ready).toBe(true);
    });
  });
});
