import { describe, expect, it } from 'vitest';
import { KeyedSerializer } from '../../src/service/keyed-serializer.js';

const tick = async () => new Promise((r) => setTimeout(r, 1));

describe('KeyedSerializer', () => {
  it('runs tasks of one key one at a time, in order', async () => {
    const serializer = new KeyedSerializer();
    const log: string[] = [];
    let running = 0;
    const task = (name: string) => async () => {
      running += 1;
      expect(running).toBe(1);
      log.push(`start ${name}`);
      await tick();
      log.push(`end ${name}`);
      running -= 1;
      return name;
    };
    const results = await Promise.all(['a', 'b', 'c'].map(async (n) => serializer.run('user', task(n))));
    expect(results).toEqual(['a', 'b', 'c']);
    expect(log).toEqual(['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
    expect(serializer.size).toBe(0);
  });

  it('runs different keys concurrently', async () => {
    const serializer = new KeyedSerializer();
    let running = 0;
    let peak = 0;
    const task = async () => {
      running += 1;
      peak = Math.max(peak, running);
      await tick();
      running -= 1;
    };
    await Promise.all([serializer.run('a', task), serializer.run('b', task)]);
    expect(peak).toBe(2);
  });

  it('a failed task rejects its caller and does not block the next one', async () => {
    const serializer = new KeyedSerializer();
    const failed = serializer.run('k', async () => Promise.reject(new Error('boom')));
    const next = serializer.run('k', async () => Promise.resolve('next'));
    await expect(failed).rejects.toThrow('boom');
    await expect(next).resolves.toBe('next');
  });
});
