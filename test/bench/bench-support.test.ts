import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { percentile, runClosedLoop } from '../../bench/support/closed-loop.js';
import {
  checkTargets,
  cpuMicrosPerRequest,
  workerMicrosPerRequest,
  type ScenarioResult,
} from '../../bench/support/report.js';
import { workerNodeFlags } from '../../bench/support/processes.js';
import { nextWrite, UserPool } from '../../bench/support/workloads.js';

describe('UserPool.pick', () => {
  it.each([
    [1000, 64],
    [1000, 16],
    [64, 64],
  ])('with %i users and %i lanes gives each lane users of its own', (users, lanes) => {
    const pool = new UserPool('u', users);
    const seen = new Map<string, number>();
    for (let lane = 0; lane < lanes; lane += 1) {
      for (let i = 0; i < 200; i += 1) {
        const user = pool.pick(lane, i, lanes);
        expect(seen.get(user) ?? lane).toBe(lane);
        seen.set(user, lane);
      }
    }
    expect(seen.size).toBe(Math.floor(users / lanes) * lanes);
  });

  it('shares users between lanes when there are fewer users than lanes', () => {
    const pool = new UserPool('u', 1);
    expect(new Set([0, 1, 63].map((lane) => pool.pick(lane, 5, 64)))).toEqual(new Set(['@u-0:bench.example.org']));
  });
});

describe('nextWrite', () => {
  it('counts the writes of each op to each user, so values derived from it change on every write', () => {
    expect([0, 1, 2].map(() => nextWrite('set_pushrule_enabled', '@a:x') % 2)).toEqual([0, 1, 0]);
    expect(nextWrite('set_pushrule_enabled', '@b:x')).toBe(0);
    expect(nextWrite('set_pusher', '@a:x')).toBe(0);
  });
});

describe('percentile', () => {
  it.each([
    [0.5, 50],
    [0.99, 99],
    [1, 100],
  ])('nearest rank %f of 1..100 is %i', (q, expected) => {
    expect(
      percentile(
        Array.from({ length: 100 }, (_, i) => i + 1),
        q,
      ),
    ).toBe(expected);
  });

  it('is NaN without samples', () => {
    expect(percentile([], 0.5)).toBeNaN();
  });
});

describe('runClosedLoop', () => {
  it('keeps one request per lane in flight and counts errors apart from answers', async () => {
    const inFlight = { now: 0, max: 0 };
    const result = await runClosedLoop({
      concurrency: 4,
      warmupMs: 0,
      measureMs: 100,
      call: async (_lane, i) => {
        inFlight.now += 1;
        inFlight.max = Math.max(inFlight.max, inFlight.now);
        await new Promise((resolve) => setImmediate(resolve));
        inFlight.now -= 1;
        if (i % 2 === 1) throw new Error('odd');
      },
    });
    expect(inFlight.max).toBe(4);
    expect(result.ops).toBeGreaterThan(0);
    expect(Math.abs(result.errors - result.ops)).toBeLessThanOrEqual(4);
    expect(result.firstError).toBe('odd');
    expect(result.throughput).toBe(result.ops / 0.1);
  });
});

/** A scenario result with the fields the targets read. */
function aResult(overrides: Partial<ScenarioResult>): ScenarioResult {
  return {
    id: 'x',
    group: 'worker',
    op: 'get_pushrules',
    workers: 1,
    userRules: 0,
    users: 1000,
    concurrency: 64,
    ops: 1,
    errors: 0,
    firstError: undefined,
    throughput: 1000,
    p50Ms: 1,
    p99Ms: 2,
    cpu: {},
    workerRssBytes: undefined,
    ...overrides,
  };
}

describe('checkTargets', () => {
  const baselines = [
    aResult({ group: 'broker', op: 'echo', throughput: 10_000, concurrency: 64 }),
    aResult({ group: 'store', op: 'rules-read', throughput: 8_000, concurrency: 64 }),
    aResult({ group: 'store', op: 'rules-write', throughput: 3_000, concurrency: 64 }),
  ];

  it('judges reads against half of the lower baseline', () => {
    const met = checkTargets([...baselines, aResult({ op: 'get_pushrules', throughput: 4_000 })], []);
    const missed = checkTargets([...baselines, aResult({ op: 'get_pushrules', throughput: 3_999 })], []);
    expect(met[0]).toMatchObject({ met: true, measured: expect.stringContaining('(store) = 50%') as unknown });
    expect(missed[0]?.met).toBe(false);
  });

  it('judges writes against 35% of the lower baseline', () => {
    const [check] = checkTargets([...baselines, aResult({ op: 'set_pushrule', throughput: 1_050 })], []);
    expect(check).toMatchObject({ target: expect.stringContaining('35%') as unknown, met: true });
  });

  it('judges latency at c=1 against broker p50 + store p50 + 0.5 ms', () => {
    const at1 = [
      aResult({ group: 'broker', op: 'echo', concurrency: 1, p50Ms: 0.7 }),
      aResult({ group: 'store', op: 'rules-read', concurrency: 1, p50Ms: 0.2 }),
    ];
    expect(checkTargets([...at1, aResult({ concurrency: 1, p50Ms: 1.4 })], [])[0]?.met).toBe(true);
    expect(checkTargets([...at1, aResult({ concurrency: 1, p50Ms: 1.41 })], [])[0]?.met).toBe(false);
  });

  it('judges growth and memory', () => {
    const growth = [
      aResult({ group: 'growth', userRules: 0, throughput: 1_000 }),
      aResult({ group: 'growth', userRules: 100, throughput: 690 }),
    ];
    const MB = 1024 * 1024;
    const checks = checkTargets(growth, [
      { ran: 'worker/*', bytes: 200 * MB },
      { ran: 'growth/rules0', bytes: 150 * MB },
      { ran: 'growth/rules1000', bytes: 201 * MB },
    ]);
    expect(checks.map((c) => [c.target, c.met])).toEqual([
      ['writes with 100 user rules ≥ 70% of writes with 0', false],
      ['worker peak RSS ≤ 200 MB (worker/*)', true],
      ['worker peak RSS ≤ 200 MB (growth/rules1000)', false],
    ]);
  });
});

describe('checkTargets for reads on the read queue (issue 17)', () => {
  const at = (concurrency: number, p50Ms: number, throughput: number) => [
    aResult({ group: 'broker', op: 'echo', concurrency, p50Ms: 5, throughput: 20_000 }),
    aResult({ group: 'broker', op: 'echo-classic', concurrency, p50Ms, throughput }),
    aResult({ group: 'store', op: 'rules-read', concurrency, p50Ms: 0.2, throughput: 8_000 }),
  ];
  const issue17 = (checks: readonly { target: string; met: boolean }[]) =>
    checks.filter(
      (c) =>
        (c.target.includes('classic echo') || c.target.includes('CPU')) &&
        !c.target.includes('− classic echo') &&
        !c.target.includes('÷ classic echo'),
    );

  it('judges p50 at c=1 against classic echo p50 + store p50 + 0.15 ms', () => {
    const base = at(1, 0.5, 2_000);
    expect(
      issue17(checkTargets([...base, aResult({ op: 'get_pushrule_enabled', concurrency: 1, p50Ms: 0.85 })], [])),
    ).toMatchObject([{ met: true }]);
    expect(
      issue17(checkTargets([...base, aResult({ op: 'get_pushrules', concurrency: 1, p50Ms: 0.86 })], [])),
    ).toMatchObject([{ met: false }]);
  });

  it('judges every read at c=64 against 60% of min(classic echo, store) and the worker CPU per get_pushrule_enabled', () => {
    const base = at(64, 5, 10_000);
    const checks = issue17(
      checkTargets(
        [
          ...base,
          aResult({ op: 'get_pushrule_actions', throughput: 4_800 }),
          aResult({ op: 'get_pushrule_enabled', throughput: 4_799, cpu: { worker: 48, rabbitmq: 100 } }),
        ],
        [],
      ),
    );
    expect(checks.map((c) => [c.target, c.met])).toEqual([
      ['get_pushrule_actions at c=64 ≥ 60% of min(classic echo, store rules-read)', true],
      ['get_pushrule_enabled at c=64 ≥ 60% of min(classic echo, store rules-read)', false],
      ['worker CPU per get_pushrule_enabled at c=64 ≤ 100 µs', false],
    ]);
  });

  it('fails a read whose classic echo baseline answered nothing (a broker restarted under it)', () => {
    const checks = issue17(
      checkTargets(
        [
          aResult({ group: 'broker', op: 'echo-classic', throughput: 0, p50Ms: Number.NaN }),
          aResult({ group: 'store', op: 'rules-read', throughput: 8_000 }),
          aResult({ op: 'get_pushrules', throughput: 5_000 }),
        ],
        [],
      ),
    );
    expect(checks.map((c) => c.met)).toEqual([false]);
  });

  it('judges writes against their ratio to the store in the issue 6 run, within 10%', () => {
    const store = aResult({ group: 'store', op: 'rules-write', throughput: 1_000 });
    const check = (throughput: number) =>
      checkTargets([store, aResult({ op: 'set_pushrule_enabled', throughput })], []).find((c) =>
        c.target.includes('issue 6 run'),
      )?.met;
    expect(check(442)).toBe(true);
    expect(check(440)).toBe(false);
  });
});

describe('workerMicrosPerRequest', () => {
  it('divides the CPU of the worker processes alone by the requests answered', () => {
    expect(
      workerMicrosPerRequest(aResult({ throughput: 2_000, cpu: { worker1: 10, worker2: 10, rabbitmq: 100 } })),
    ).toBe(100);
  });
});

describe('cpuMicrosPerRequest', () => {
  it('divides the CPU of every process by the requests answered', () => {
    expect(cpuMicrosPerRequest(aResult({ throughput: 2_000, cpu: { worker: 100, rabbitmq: 100 } }))).toBe(1_000);
  });
});

describe('workerNodeFlags', () => {
  it("are npm start's, and the Docker image's worker runs with the same", () => {
    const flags = workerNodeFlags();
    expect(flags).toContain('--max-semi-space-size=8');
    const dockerfile = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8');
    expect(dockerfile).toContain(`CMD ${JSON.stringify(['node', ...flags, 'dist/main.js']).replaceAll(',', ', ')}`);
  });
});

describe('checkTargets for reads at the transport floor (issue 35)', () => {
  const floor = (checks: readonly { target: string; met: boolean }[]) =>
    checks.filter((c) => c.target.includes('− classic echo') || c.target.includes('÷ classic echo'));
  const classic = (concurrency: number, p50Ms: number, throughput: number) =>
    aResult({ group: 'broker', op: 'echo-classic', concurrency, p50Ms, throughput });

  it.each<[string, number, boolean]>([
    ['0.1 ms over the echo', 0.6, true],
    ['just over 0.1 ms', 0.61, false],
  ])('judges p50 at c=1 against the classic echo alone: %s', (_, p50Ms, met) => {
    const checks = floor(
      checkTargets([classic(1, 0.5, 2_000), aResult({ op: 'get_pushrule_enabled', concurrency: 1, p50Ms })], []),
    );
    expect(checks.map((c) => [c.target, c.met])).toEqual([
      ['get_pushrule_enabled p50 at c=1 − classic echo p50 ≤ 0.1 ms', met],
    ]);
  });

  it.each<[number, boolean]>([
    [6_000, true],
    [5_999, false],
  ])('judges get_pushrules at c=64 at %i/s against 0.6 of the classic echo', (throughput, met) => {
    const checks = floor(checkTargets([classic(64, 5, 10_000), aResult({ op: 'get_pushrules', throughput })], []));
    expect(checks.map((c) => [c.target, c.met])).toEqual([['get_pushrules at c=64 ÷ classic echo ≥ 0.6', met]]);
  });
});
