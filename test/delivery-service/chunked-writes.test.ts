import { describe, expect, it } from 'vitest';
import { ChunkedWrites } from '../../src/delivery-service/chunked-writes.js';

const turn = async () => new Promise((resolve) => setImmediate(resolve));

/** A writer whose writes land when told to, recording each chunk and how many were in flight at most. */
function aWriter() {
  const chunks: string[][] = [];
  const landings: { readonly land: () => void; readonly fail: (error: Error) => void }[] = [];
  let inFlight = 0;
  let most = 0;
  return {
    chunks,
    get most() {
      return most;
    },
    write: async (chunk: readonly string[]) => {
      chunks.push([...chunk]);
      inFlight += 1;
      most = Math.max(most, inFlight);
      try {
        await new Promise<void>((land, fail) => landings.push({ land, fail }));
      } finally {
        inFlight -= 1;
      }
    },
    /** Lands every write in flight, turn after turn, until none is left. */
    async landAll() {
      for (let next = landings.shift(); next !== undefined; next = landings.shift()) {
        next.land();
        await turn();
      }
    },
    failNext(error: Error) {
      landings.shift()?.fail(error);
    },
    landNext() {
      landings.shift()?.land();
    },
  };
}

const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${String(i)}`);

describe('ChunkedWrites: the journal’s writes of waiting requests', () => {
  it.each([
    { items: 0, chunk: 3, chunks: [] },
    { items: 1, chunk: 3, chunks: [1] },
    { items: 3, chunk: 3, chunks: [3] },
    { items: 7, chunk: 3, chunks: [3, 3, 1] },
  ])('writes $items items in chunks of at most $chunk, in order: $chunks', async ({ items, chunk, chunks }) => {
    const writes = new ChunkedWrites({ chunk, inFlight: 2 });
    const writer = aWriter();
    const list = ids('r', items);
    const written = writes.write(list, writer.write, () => true);
    await writer.landAll();
    await expect(written).resolves.toBe(items);
    expect(writer.chunks.map((c) => c.length)).toEqual(chunks);
    expect(writer.chunks.flat()).toEqual(list);
  });

  it('has at most inFlight writes out at once, every list together, each list’s chunks one after another', async () => {
    const writes = new ChunkedWrites({ chunk: 2, inFlight: 2 });
    const writer = aWriter();
    const lists = [ids('a', 5), ids('b', 4), ids('c', 3)];
    const written = Promise.all(lists.map(async (list) => writes.write(list, writer.write, () => true)));
    await turn();
    expect(writer.chunks).toHaveLength(2);
    await writer.landAll();
    await expect(written).resolves.toEqual([5, 4, 3]);
    expect(writer.most).toBe(2);
    for (const list of lists)
      expect(writer.chunks.filter((chunk) => list.includes(chunk[0] ?? '')).flat()).toEqual(list);
  });

  it('stops before a chunk when mayWrite says no, and tells how many were written', async () => {
    const writes = new ChunkedWrites({ chunk: 2, inFlight: 1 });
    const writer = aWriter();
    let holds = true;
    const written = writes.write(ids('r', 6), writer.write, () => holds);
    await turn();
    writer.landNext();
    await turn();
    // The second chunk went out while it held; the third is not started.
    holds = false;
    writer.landNext();
    await expect(written).resolves.toBe(4);
    expect(writer.chunks).toEqual([
      ['r0', 'r1'],
      ['r2', 'r3'],
    ]);
  });

  it('asks mayWrite when a chunk’s turn comes, not when it starts waiting for it', async () => {
    const writes = new ChunkedWrites({ chunk: 10, inFlight: 1 });
    const writer = aWriter();
    let holds = true;
    const first = writes.write(['a'], writer.write, () => true);
    const second = writes.write(['b'], writer.write, () => holds);
    await turn();
    holds = false;
    writer.landNext();
    await expect(first).resolves.toBe(1);
    await expect(second).resolves.toBe(0);
    expect(writer.chunks).toEqual([['a']]);
  });

  it('rejects with a chunk’s failure and writes nothing of its list after it; other lists carry on', async () => {
    const writes = new ChunkedWrites({ chunk: 1, inFlight: 1 });
    const writer = aWriter();
    const failing = writes.write(['a0', 'a1', 'a2'], writer.write, () => true);
    const other = writes.write(['b0', 'b1'], writer.write, () => true);
    await turn();
    writer.landNext();
    await turn();
    // Turns go in arrival order: b0 waited before a1.
    writer.landNext();
    await turn();
    writer.failNext(new Error('the connection dropped'));
    await expect(failing).rejects.toThrow('the connection dropped');
    await writer.landAll();
    await expect(other).resolves.toBe(2);
    expect(writer.chunks).toEqual([['a0'], ['b0'], ['a1'], ['b1']]);
  });

  it.each([
    { chunk: 0, inFlight: 1 },
    { chunk: 1.5, inFlight: 1 },
    { chunk: 1, inFlight: 0 },
  ])('refuses the bounds $chunk a chunk, $inFlight at once', ({ chunk, inFlight }) => {
    expect(() => new ChunkedWrites({ chunk, inFlight })).toThrow(RangeError);
  });
});
