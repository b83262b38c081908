import { describe, expect, it } from 'vitest';
import {
  breakerBound,
  checkDeliveryTargets,
  deliveryMarkdown,
  devicesPerSecond,
  sendingDevicesPerSecond,
  type FanOutRow,
} from '../../bench/support/delivery-report.js';

const row = (id: string, roundsMs: number[], firstMs: number[], devices = 10_000, requests = 10_000): FanOutRow => ({
  id,
  devices,
  requests,
  roundsMs,
  firstMs,
  cpu: { worker: 1000 },
});

describe('breakerBound', () => {
  it('allows the requests in flight, the failures that open the breaker, and a probe per doubling step', () => {
    // Probes at least 0.5, 1, 2, 4, 8, 16, 32 s apart: 7 fit in 60 s (63.5 s would be the 8th).
    expect(breakerBound(60_000)).toBe(32 + 5 + 7);
    expect(breakerBound(15_000)).toBe(32 + 5 + 5);
  });
});

describe('delivery figures', () => {
  it('takes the median round, and the sending alone from the first device to the last', () => {
    const r = row('delivery/fanout', [4000, 2000, 3000], [1000, 500, 1000]);
    expect(devicesPerSecond(r)).toBe(10_000 / 3);
    expect(sendingDevicesPerSecond(r)).toBe(10_000 / 2);
  });

  it('judges the fan-out on the raw limit, the batched scenario on requests and time, isolation on p99', () => {
    const checks = checkDeliveryTargets({
      gateways: 4,
      rounds: 3,
      loadAverageAtStart: [],
      raw: row('delivery/raw', [2000], [100]),
      fanout: row('delivery/fanout', [3000], [1000]),
      batched: row('delivery/batched', [3900], [1000], 30_000, 10_000),
      slow: row('delivery/slow', [2500], [1000]),
      isolation: {
        idle: { samples: 100, p50Ms: 1, p99Ms: 2, errors: 0 },
        during: { samples: 100, p50Ms: 1, p99Ms: 5, errors: 0 },
        fanOuts: 3,
      },
      notes: [],
    });
    expect(checks.map((c) => c.met)).toEqual([true, false, false, false]);
    expect(checks[0]?.measured).toContain('= 0.67');
    expect(checks[2]?.measured).toContain('10,000 requests');
    expect(checks[3]?.measured).toContain('= 2.50');
  });

  it('shows the loops beside the isolation row, which judge nothing', () => {
    const isolation = {
      idle: { samples: 100, p50Ms: 10, p99Ms: 20, errors: 0 },
      during: { samples: 100, p50Ms: 10, p99Ms: 60, errors: 0 },
      stored: {
        idle: { samples: 300, p50Ms: 1, p99Ms: 4, errors: 0 },
        during: { samples: 200, p50Ms: 1, p99Ms: 50, errors: 0 },
      },
      store: {
        idle: { samples: 100, p50Ms: 8, p99Ms: 15, errors: 0 },
        during: { samples: 90, p50Ms: 9, p99Ms: 52.5, errors: 0 },
      },
      storeFirstWrite: {
        idle: { samples: 80, p50Ms: 12, p99Ms: 25, errors: 0 },
        during: { samples: 70, p50Ms: 14, p99Ms: 75, errors: 0 },
      },
      fanOuts: 3,
    };
    const results = { gateways: 4, rounds: 1, loadAverageAtStart: [], isolation, notes: [] };
    const [check] = checkDeliveryTargets(results);
    expect(check?.met).toBe(false);
    expect(check?.measured).toBe(
      "60.00 ms ÷ 20.00 ms = 3.00 (reads of stored rules: 50.00 ms ÷ 4.00 ms = 12.50; the database alone: 52.50 ms ÷ 15.00 ms = 3.50; a first read's write alone: 75.00 ms ÷ 25.00 ms = 3.00)",
    );
    const markdown = deliveryMarkdown(results);
    expect(markdown).toContain(
      '| get_pushrules of 200 users whose rules are stored, during 1 fan-out of 10k | 200 | 0 |',
    );
    expect(markdown).toContain('| the database alone (`findOne` by `_id` from the bench), idle | 100 | 0 |');
    expect(markdown).toContain(
      '| the database alone (`findOne` by `_id` from the bench), during 1 fan-out of 10k | 90 | 0 |',
    );
    expect(markdown).toContain(
      "| a first read's write alone (the worker's upsert of a user's defaults, from the bench), during 1 fan-out of 10k | 70 | 0 | 14.00 ms | 75.00 ms |",
    );
  });

  it("counts the deliver-only worker's share over every fan-out, the loops beside the judged one included", () => {
    const markdown = deliveryMarkdown({
      gateways: 4,
      rounds: 1,
      loadAverageAtStart: [],
      roles: {
        idle: { samples: 100, p50Ms: 1, p99Ms: 2, errors: 0 },
        during: { samples: 100, p50Ms: 1, p99Ms: 2, errors: 0 },
        fanOuts: 3,
        fanOutsInAll: 5,
        devices: 50_000,
        deliveredByDeliverWorker: 50_000,
      },
      notes: [],
    });
    expect(markdown).toContain('The deliver-only worker delivered 50,000 of the 50,000 devices of 5 fan-outs of 10k.');
  });

  it.each([
    ['every device delivered by the deliver-only worker, reads within 1.2 × idle', 30_000, 2.4, [true, true]],
    ['a device delivered elsewhere (or not at all)', 29_999, 2.4, [false, true]],
    ['reads slower than 1.2 × idle while it delivers', 30_000, 2.5, [true, false]],
  ] as const)('judges the roles row: %s', (_, delivered, duringP99Ms, met) => {
    const checks = checkDeliveryTargets({
      gateways: 4,
      rounds: 1,
      loadAverageAtStart: [],
      roles: {
        idle: { samples: 100, p50Ms: 1, p99Ms: 2, errors: 0 },
        during: { samples: 100, p50Ms: 1, p99Ms: duringP99Ms, errors: 0 },
        fanOuts: 3,
        devices: 30_000,
        deliveredByDeliverWorker: delivered,
      },
      notes: [],
    });
    expect(checks.map((c) => c.met)).toEqual(met);
  });

  it.each<[string, number, number, number, number, boolean[], string[]]>([
    // case, worker CPU ms per round, bare CPU ms, fan-out ms, bare ms, met, measured
    ['both met at 1.5 ×', 1500, 1000, 3000, 2000, [true, true], ['150 µs ÷ 100 µs = 1.50', '3.00 s ÷ 2.00 s = 1.50']],
    ['both missed', 3000, 1000, 5000, 2000, [false, false], ['300 µs ÷ 100 µs = 3.00', '5.00 s ÷ 2.00 s = 2.50']],
  ])(
    'judges a delivered device against the bare client: CPU per device and wall time (%s)',
    (_case, workerCpu, bareCpu, fanoutMs, bareMs, met, measured) => {
      const checks = checkDeliveryTargets({
        gateways: 4,
        rounds: 1,
        loadAverageAtStart: [],
        bare: { ...row('delivery/bare', [bareMs], [100]), cpu: { load: bareCpu, gateways: 900 } },
        fanout: { ...row('delivery/fanout', [fanoutMs], [1000]), cpu: { worker: workerCpu, load: 50 } },
        notes: [],
      });
      expect(checks.map((c) => c.met)).toEqual(met);
      expect(checks.map((c) => c.measured)).toEqual(measured);
    },
  );

  it('prints every row with its ratio to the raw limit of the same gateways', () => {
    const text = deliveryMarkdown({
      gateways: 4,
      rounds: 1,
      loadAverageAtStart: [],
      raw: row('delivery/raw', [2000], [100]),
      fanout: row('delivery/fanout', [4000], [1000]),
      notes: ['a note'],
    });
    expect(text).toContain('| delivery/fanout | 10,000 | 10,000 | 1000 ms | 4000 ms | 4000 ms | 2,500 | 0.50 |');
    expect(text).toContain('a note');
  });
});
