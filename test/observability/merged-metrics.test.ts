import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { mergedMetrics } from '../../src/observability/merged-metrics.js';
import { WorkerMetrics } from '../../src/observability/metrics.js';

/** The samples of the exposition, by name and labels, as Prometheus reads them. */
function samplesOf(text: string): Record<string, number> {
  const samples: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const cut = line.lastIndexOf(' ');
    samples[line.slice(0, cut)] = Number(line.slice(cut + 1));
  }
  return samples;
}

describe('mergedMetrics', () => {
  it("keeps each registry's own families as they are and sums the families both have, sample by sample", async () => {
    const main = new Registry();
    const thread = new Registry();
    const requests = (registry: Registry) =>
      new Counter({ name: 'requests_total', help: 'h', labelNames: ['queue'], registers: [registry] });
    requests(main).inc({ queue: 'request' }, 5);
    requests(thread).inc({ queue: 'deliver' }, 2);
    const consuming = (registry: Registry) =>
      new Gauge({ name: 'consuming', help: 'h', labelNames: ['queue'], registers: [registry] });
    consuming(main).set({ queue: 'deliver' }, 0);
    consuming(thread).set({ queue: 'deliver' }, 1);
    // prom-client's cluster aggregation would drop this one ('omit') and average others.
    new Gauge({ name: 'process_start_time_seconds', help: 'h', registers: [main], aggregator: 'omit' }).set(1234);
    const latency = new Histogram({ name: 'latency_seconds', help: 'h', buckets: [1], registers: [thread] });
    latency.observe(0.5);
    latency.observe(2);

    const merged = mergedMetrics([await main.getMetricsAsJSON(), await thread.getMetricsAsJSON()]);

    expect(samplesOf(await merged.metrics())).toEqual({
      'requests_total{queue="request"}': 5,
      'requests_total{queue="deliver"}': 2,
      'consuming{queue="deliver"}': 1,
      process_start_time_seconds: 1234,
      'latency_seconds_bucket{le="1"}': 1,
      'latency_seconds_bucket{le="+Inf"}': 2,
      latency_seconds_sum: 2.5,
      latency_seconds_count: 2,
    });
  });

  it("keeps a worker's two broker sessions apart, even when both end on the same node", async () => {
    const main = new WorkerMetrics(() => 0, { processMetrics: false });
    const thread = new WorkerMetrics(() => 0, { processMetrics: false, session: 'delivery' });
    for (const metrics of [main, thread]) {
      metrics.brokerConnected('rabbit-1:5672');
      metrics.brokerLost('rabbit-1:5672');
      metrics.reconnected();
      metrics.brokerConnected('rabbit-2:5672');
    }

    const merged = mergedMetrics([await main.registry.getMetricsAsJSON(), await thread.registry.getMetricsAsJSON()]);

    const samples = samplesOf(await merged.metrics());
    const broker = Object.fromEntries(Object.entries(samples).filter(([name]) => name.includes('_amqp_')));
    expect(broker).toEqual({
      'push_worker_amqp_reconnects_total{session="requests"}': 1,
      'push_worker_amqp_reconnects_total{session="delivery"}': 1,
      'push_worker_amqp_connected{broker="rabbit-1:5672",session="requests"}': 0,
      'push_worker_amqp_connected{broker="rabbit-2:5672",session="requests"}': 1,
      'push_worker_amqp_connected{broker="rabbit-1:5672",session="delivery"}': 0,
      'push_worker_amqp_connected{broker="rabbit-2:5672",session="delivery"}': 1,
      'push_worker_amqp_connection_losses_total{broker="rabbit-1:5672",session="requests"}': 1,
      'push_worker_amqp_connection_losses_total{broker="rabbit-1:5672",session="delivery"}': 1,
    });
  });
});
