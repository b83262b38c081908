import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { QueueDepthMetrics, type QueueCounts, type QueueProbe } from '../../src/observability/queue-depth-metrics.js';

const QUEUES = { request: 'matrix.push.rpc', read: 'matrix.push.read', evaluate: 'matrix.push.evaluate' };

function gauges(probe: QueueProbe, timeoutMs?: number): Registry {
  const registry = new Registry();
  new QueueDepthMetrics('push_worker', registry, {
    queues: QUEUES,
    probe,
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
  });
  return registry;
}

describe('queue depth metrics', () => {
  it("reports each queue's ready messages and consumers by role, counted once per scrape", async () => {
    const asked: string[] = [];
    const counts: Record<string, QueueCounts> = {
      'matrix.push.rpc': { messageCount: 12, consumerCount: 3 },
      'matrix.push.read': { messageCount: 0, consumerCount: 3 },
      'matrix.push.evaluate': { messageCount: 240, consumerCount: 2 },
    };
    const registry = gauges({
      check: async (queue) => {
        asked.push(queue);
        await Promise.resolve();
        const found = counts[queue];
        if (found === undefined) throw new Error(`no queue ${queue}`);
        return found;
      },
    });
    const text = await registry.metrics();
    expect(text).toContain('push_worker_queue_messages_ready{queue="request"} 12');
    expect(text).toContain('push_worker_queue_messages_ready{queue="read"} 0');
    expect(text).toContain('push_worker_queue_messages_ready{queue="evaluate"} 240');
    expect(text).toContain('push_worker_queue_consumers{queue="request"} 3');
    expect(text).toContain('push_worker_queue_consumers{queue="evaluate"} 2');
    // Both gauges came from one passive declare per queue.
    expect(asked).toEqual(['matrix.push.rpc', 'matrix.push.read', 'matrix.push.evaluate']);
  });

  it('leaves out a queue that could not be counted, and counts it again at the next scrape', async () => {
    let readDeclared = false;
    const registry = gauges({
      check: async (queue) => {
        await Promise.resolve();
        if (queue === 'matrix.push.read' && !readDeclared) throw new Error('NOT_FOUND - no queue');
        return { messageCount: 1, consumerCount: 1 };
      },
    });
    const first = await registry.metrics();
    expect(first).toContain('push_worker_queue_messages_ready{queue="request"} 1');
    expect(first).not.toContain('queue="read"');
    expect(first).toContain('push_worker_queue_messages_ready{queue="evaluate"} 1');
    readDeclared = true;
    expect(await registry.metrics()).toContain('push_worker_queue_consumers{queue="read"} 1');
    readDeclared = false;
    expect(await registry.metrics()).not.toContain('queue="read"');
  });

  it('does not hold a scrape for a broker that does not answer, nor pile counts up behind it', async () => {
    const asked: string[] = [];
    let release: (() => void) | undefined;
    const registry = gauges(
      {
        check: async (queue) => {
          asked.push(queue);
          if (asked.length === 1) await new Promise<void>((resolve) => (release = resolve));
          return { messageCount: 5, consumerCount: 1 };
        },
      },
      20,
    );
    const started = Date.now();
    expect(await registry.metrics()).not.toContain('push_worker_queue_messages_ready{');
    expect(Date.now() - started).toBeLessThan(1_000);
    // The hanging count is not started again on top of it.
    expect(await registry.metrics()).not.toContain('push_worker_queue_messages_ready{');
    expect(asked).toEqual(['matrix.push.rpc']);
    // Once it ends, the next scrape counts afresh.
    release?.();
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(await registry.metrics()).toContain('push_worker_queue_messages_ready{queue="request"} 5');
    expect(asked).toHaveLength(6);
  });
});
