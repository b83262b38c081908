import { describe, expect, it } from 'vitest';
import { ReadBatcher } from '../../src/store/read-batcher.js';

const turn = async () => new Promise((resolve) => setImmediate(resolve));

/** A batcher over a map of documents that records every query and lets the test answer them. */
function fixture(docs: Record<string, string>, maxBatch = 3) {
  const queries: string[][] = [];
  const pending: (() => void)[] = [];
  const answer = async <T>(keys: readonly string[], value: () => T): Promise<T> => {
    queries.push([...keys]);
    await new Promise<void>((resolve) => pending.push(resolve));
    return value();
  };
  const batcher = new ReadBatcher<string>({
    fetchOne: async (key) => answer([key], () => docs[key] ?? null),
    fetchMany: async (keys) =>
      answer(keys, () => new Map(keys.flatMap((k) => (docs[k] === undefined ? [] : [[k, docs[k]] as const])))),
    maxBatch,
  });
  const release = () => {
    for (const resolve of pending.splice(0)) resolve();
  };
  return { batcher, queries, release };
}

describe('ReadBatcher', () => {
  it('sends a read at once when nothing is being read', async () => {
    const { batcher, queries, release } = fixture({ a: 'A' });
    const read = batcher.load('a');
    expect(queries).toEqual([['a']]);
    release();
    expect(await read).toBe('A');
    expect(batcher.outstanding).toBe(0);
  });

  it('sends the reads asked for while others are out together at the end of the turn, at most maxBatch keys a query, a repeated key once', async () => {
    const { batcher, queries, release } = fixture({ a: 'A', b: 'B', c: 'C', d: 'D', e: 'E' });
    const reads = ['a', 'b', 'c', 'b', 'd', 'e'].map(async (key) => batcher.load(key));
    expect(queries).toEqual([['a']]);
    await turn();
    expect(queries).toEqual([['a'], ['b', 'c', 'd'], ['e']]);
    release();
    expect(await Promise.all(reads)).toEqual(['A', 'B', 'C', 'B', 'D', 'E']);
  });

  it('reads a key again alone when the batch did not return it, and answers null when it is absent', async () => {
    const { batcher, queries, release } = fixture({ a: 'A', b: 'B' });
    const reads = ['a', 'b', 'x'].map(async (key) => batcher.load(key));
    await turn();
    release();
    await turn();
    release();
    expect(await Promise.all(reads)).toEqual(['A', 'B', null]);
    expect(queries).toEqual([['a'], ['b', 'x'], ['x']]);
  });

  it('fails every read of a batch whose query failed, and only those', async () => {
    const batcher = new ReadBatcher<string>({
      fetchOne: async (key) => Promise.resolve(key.toUpperCase()),
      fetchMany: async () => Promise.reject(new Error('network')),
      maxBatch: 10,
    });
    const reads = ['a', 'b', 'c'].map(async (key) =>
      batcher.load(key).catch((error: unknown) => (error as Error).message),
    );
    expect(await Promise.all(reads)).toEqual(['A', 'network', 'network']);
    expect(await batcher.load('d')).toBe('D');
  });
});
