import { describe, expect, it } from 'vitest';
import { WeightedBudget } from '../../src/service/weighted-budget.js';

/** A task that runs until `finish()` is called, recording when it started. */
function gate(started: string[], name: string) {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  return {
    finish: () => {
      finish();
    },
    task: async () => {
      started.push(name);
      await done;
      return name;
    },
  };
}

const turn = async () => new Promise((resolve) => setImmediate(resolve));

describe('WeightedBudget', () => {
  it('runs tasks while their weights fit, and the next ones in arrival order as weight is released', async () => {
    const budget = new WeightedBudget(10);
    const started: string[] = [];
    const [a, b, c, d] = [gate(started, 'a'), gate(started, 'b'), gate(started, 'c'), gate(started, 'd')];
    const runs = [budget.run(6, a.task), budget.run(4, b.task), budget.run(5, c.task), budget.run(1, d.task)];
    await turn();
    // d would fit, but waits behind c: no large task is overtaken for ever.
    expect(started).toEqual(['a', 'b']);
    expect([budget.used, budget.waiting]).toEqual([10, 2]);
    a.finish();
    await turn();
    expect(started).toEqual(['a', 'b', 'c', 'd']);
    expect(budget.used).toBe(10);
    b.finish();
    c.finish();
    d.finish();
    expect(await Promise.all(runs)).toEqual(['a', 'b', 'c', 'd']);
    expect([budget.used, budget.waiting]).toEqual([0, 0]);
  });

  it('runs a task heavier than the whole capacity alone, once nothing else runs', async () => {
    const budget = new WeightedBudget(10);
    const started: string[] = [];
    const [small, huge, after] = [gate(started, 'small'), gate(started, 'huge'), gate(started, 'after')];
    const runs = [budget.run(1, small.task), budget.run(50, huge.task), budget.run(1, after.task)];
    await turn();
    expect(started).toEqual(['small']);
    small.finish();
    await turn();
    expect(started).toEqual(['small', 'huge']);
    huge.finish();
    await turn();
    expect(started).toEqual(['small', 'huge', 'after']);
    after.finish();
    await Promise.all(runs);
  });

  it('never holds back tasks of weight 0, nor any task with capacity 0', async () => {
    const started: string[] = [];
    const full = new WeightedBudget(1);
    const heavy = gate(started, 'heavy');
    const running = full.run(1, heavy.task);
    await full.run(0, async () => Promise.resolve(started.push('weightless')));
    const unbounded = new WeightedBudget(0);
    const other = gate(started, 'other');
    const both = [unbounded.run(100, other.task), unbounded.run(100, async () => Promise.resolve('free'))];
    await turn();
    expect(started).toEqual(['heavy', 'weightless', 'other']);
    heavy.finish();
    other.finish();
    await Promise.all([running, ...both]);
  });

  it('releases the weight of a task that throws', async () => {
    const budget = new WeightedBudget(5);
    await expect(budget.run(5, async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(budget.used).toBe(0);
    expect(await budget.run(5, async () => Promise.resolve('next'))).toBe('next');
  });
});
