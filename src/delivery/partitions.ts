/**
 * Delivery is spread over the pool by partition (docs/delivery.md): every
 * user belongs to one of a fixed number of partitions, each partition is
 * delivered by one worker at a time, and the partitions are shared out
 * among the live workers. Everything here is pure: the same inputs give the
 * same answer on every worker, which is what lets them agree without
 * talking to each other.
 */

/**
 * The partition of a user: FNV-1a over the user ID's UTF-16 code units,
 * reduced modulo `count`. Stable across processes, versions and
 * platforms: it decides which queue a user's notifications wait in, so it
 * must never change for a given count.
 */
export function partitionOf(userId: string, count: number): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < userId.length; index += 1) {
    hash ^= userId.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % count;
}

/** The partition's name in queue names and store documents: `p` and three digits (`p007`). */
export function partitionName(partition: number): string {
  return `p${String(partition).padStart(3, '0')}`;
}

/**
 * How much a worker wants a partition (rendezvous hashing): the worker
 * with the highest weight gets it, where it has room (`assignPartitions`).
 */
function weight(worker: string, partition: number): number {
  return partitionOf(`${worker}\u0000${String(partition)}`, 0x7fffffff);
}

/**
 * Which worker delivers each partition (index: partition): every worker
 * ⌊count ÷ workers⌋ or one more (a fair share, nobody idle while there are
 * partitions enough), each partition to the worker of highest weight that
 * still has room. Deterministic for a given set of workers, whatever their
 * order; an empty pool leaves every partition to nobody.
 *
 * The room is what keeps the shares fair, and it costs movement: a
 * partition whose first choice is full goes to its next, so a worker that
 * joins moves its own share and also some partitions between the workers
 * already there (averages over 200 pools of 32 partitions, partitions that
 * move between workers other than the joiner: 2→3 workers 2.6, 4→5 3.9,
 * 7→8 5.8, 10→11 7.1, with 2.9 going to the joiner at 10→11). Each move is
 * a clean handover (docs/delivery.md): nothing lost or reordered, a few
 * seconds' pause for that partition. At most every partition moves once per
 * change of the pool.
 */
export function assignPartitions(count: number, workers: readonly string[]): readonly (string | undefined)[] {
  const live = [...new Set(workers)].sort();
  if (live.length === 0) return Array.from({ length: count }, () => undefined);
  const floor = Math.floor(count / live.length);
  // How many workers may take one more than `floor`.
  let extra = count % live.length;
  const taken = new Map<string, number>(live.map((worker) => [worker, 0]));
  const hasRoom = (worker: string) => {
    const n = taken.get(worker) ?? 0;
    return n < floor || (n === floor && extra > 0);
  };
  const owners: (string | undefined)[] = [];
  for (let partition = 0; partition < count; partition += 1) {
    const ranked = live
      .map((worker) => ({ worker, weight: weight(worker, partition) }))
      .sort((a, b) => b.weight - a.weight || (a.worker < b.worker ? -1 : 1));
    const chosen = ranked.find(({ worker }) => hasRoom(worker))?.worker;
    if (chosen !== undefined) {
      const n = taken.get(chosen) ?? 0;
      if (n === floor) extra -= 1;
      taken.set(chosen, n + 1);
    }
    owners.push(chosen);
  }
  return owners;
}

/** The partitions `worker` delivers under `assignPartitions`. */
export function partitionsOf(count: number, workers: readonly string[], worker: string): readonly number[] {
  const owners = assignPartitions(count, workers);
  const mine: number[] = [];
  for (const [partition, owner] of owners.entries()) if (owner === worker) mine.push(partition);
  return mine;
}
