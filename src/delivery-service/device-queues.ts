import { addArrivals } from '../delivery/backlog-arrivals.js';
import { gatewayOrigin } from '../delivery/circuit-breaker-origin.js';
import { emptyBacklog, markSent, type BacklogPolicy, type DeviceBacklog } from '../delivery/device-backlog.js';
import type { PendingDelivery } from '../store/delivery-store.js';

/** One device queue: its backlog and the timer that brings its next retry. */
export interface DeviceQueue {
  readonly key: string;
  readonly partition: number;
  /** Its gateway's origin: the breaker it goes through. */
  readonly origin: string;
  backlog: DeviceBacklog<PendingDelivery>;
  timer?: NodeJS.Timeout | undefined;
  /** Its front is being checked against the user's pushers. */
  checking: boolean;
  /** The front's ID, and the count of pusher changes when its last check against the pushers began. */
  checked?: { readonly id: string; readonly tick: number };
  /**
   * The front's ID when it is still out in a send this worker began before
   * it let the partition go: the queue waits for that send's verdict as
   * for one of its own (`adopt`), so nothing newer goes out meanwhile.
   */
  adopting?: string | undefined;
}

/** The breaker key of a URL that has none: one breaker for every such pusher. */
const NOT_A_URL_ORIGIN = 'invalid:';

/**
 * The device queues of the partitions this worker holds, and the requests
 * held in memory (waiting or in flight) with when they were planned on
 * this worker's clock: `-Infinity` for requests taken over from the
 * store, planned on another worker's clock before changes this worker may
 * not have heard of (checked against the pushers before they go).
 *
 * State and timers only: what a queue does next is the scheduler's
 * (`wake` is called when a queue's retry is due).
 */
export class DeviceQueues {
  readonly #queues = new Map<string, DeviceQueue>();
  readonly #held = new Map<string, number>();
  /**
   * Requests still out in a send whose partition was let go without
   * waiting for it (a lost lease): taken back by this worker before the
   * send ends, the new device queue adopts the send (`adopt`).
   */
  readonly #outOfLetGo = new Set<string>();
  /** Those of the last `take` that a queue may adopt. */
  #adoptable = new Set<string>();
  readonly #policy: BacklogPolicy;
  readonly #now: () => number;
  readonly #wake: (key: string) => void;

  constructor(policy: BacklogPolicy, now: () => number, wake: (key: string) => void) {
    this.#policy = policy;
    this.#now = now;
    this.#wake = wake;
  }

  /** Requests held and not finished. */
  get pending(): number {
    return this.#held.size;
  }

  /** When the oldest request held was taken in; undefined when none is. */
  oldestAcceptedAt(): number | undefined {
    let oldest: number | undefined;
    for (const queue of this.#queues.values()) {
      for (const item of queue.backlog.queue)
        if (oldest === undefined || item.acceptedAt < oldest) oldest = item.acceptedAt;
    }
    return oldest;
  }

  isHeld(id: string): boolean {
    return this.#held.has(id);
  }

  /** When a held request was planned (`-Infinity`: taken over, or not held). */
  plannedAt(id: string): number {
    return this.#held.get(id) ?? Number.NEGATIVE_INFINITY;
  }

  /**
   * Marks requests held, grouped by device queue, to be added (`add`);
   * those held already, and those `skip` names, are left out.
   */
  take(
    deliveries: readonly PendingDelivery[],
    plannedAt: number | undefined,
    skip: (id: string) => boolean,
  ): ReadonlyMap<string, readonly [PendingDelivery, ...PendingDelivery[]]> {
    const byKey = new Map<string, [PendingDelivery, ...PendingDelivery[]]>();
    this.#adoptable = new Set();
    for (const delivery of deliveries) {
      if (skip(delivery.id)) continue;
      if (this.#outOfLetGo.delete(delivery.id)) this.#adoptable.add(delivery.id);
      else if (this.#held.has(delivery.id)) continue;
      this.#held.set(delivery.id, plannedAt ?? Number.NEGATIVE_INFINITY);
      const list = byKey.get(delivery.key);
      if (list === undefined) byKey.set(delivery.key, [delivery]);
      else list.push(delivery);
    }
    return byKey;
  }

  /** Adds taken requests to their device queue; returns what its cap dropped, for the caller to finish. */
  add(key: string, list: readonly [PendingDelivery, ...PendingDelivery[]]): readonly PendingDelivery[] {
    const queue = this.#queueFor(key, list[0]);
    const oldest = list.reduce((a, b) => (b.seq < a.seq ? b : a));
    if (list.length > 1 && queue.backlog.queue.length === 0 && this.#adoptable.has(oldest.id)) {
      // The old send goes in first, adopted as the front in flight: the cap counts only what waits behind it, as in
      // the queue let go, rather than dropping it while it is still out and sending the next meanwhile.
      this.add(key, [oldest]);
      this.adopt(key);
      const rest = list.filter((item) => item !== oldest);
      return this.add(key, rest as [PendingDelivery, ...PendingDelivery[]]);
    }
    const change = addArrivals(queue.backlog, list, this.#policy);
    queue.backlog = change.backlog;
    return change.dropped;
  }

  /**
   * A partition taken back while a send of its earlier hold is still out
   * (its lease was lost, so letting it go did not wait for the send): the
   * store still lists that request, and sending what follows it now could
   * put a newer notification before it, should its send fail and go again.
   * The queue takes the send as its own in flight; its verdict settles it
   * here (`current`). A request the queue does not have at its front
   * (behind an older one, or dropped by the cap of a queue that held some
   * already) is sent again instead, a duplicate at worst.
   */
  adopt(key: string): void {
    const queue = this.#queues.get(key);
    const front = queue?.backlog.queue[0];
    if (queue === undefined || front === undefined || queue.backlog.inFlight || !this.#adoptable.has(front.id)) return;
    queue.backlog = markSent(queue.backlog);
    queue.adopting = front.id;
  }

  /**
   * The queue a send's verdict settles: the one that sent it, or the one
   * that adopted the send after its partition was let go and taken back.
   */
  current(sentBy: DeviceQueue, id: string): DeviceQueue {
    this.#outOfLetGo.delete(id);
    const now = this.#queues.get(sentBy.key);
    const queue = now !== sentBy && now?.adopting === id ? now : sentBy;
    queue.adopting = undefined;
    return queue;
  }

  get(key: string): DeviceQueue | undefined {
    return this.#queues.get(key);
  }

  /** Whether `queue` is still held (its partition was not handed over since). */
  holds(queue: DeviceQueue): boolean {
    return this.#queues.get(queue.key) === queue;
  }

  /** An empty queue leaves. */
  delete(queue: DeviceQueue): void {
    clearTimeout(queue.timer);
    this.#queues.delete(queue.key);
  }

  /** A request is no longer held (done with). */
  release(id: string): void {
    this.#held.delete(id);
  }

  /**
   * A queue let go while its front was in flight: what it still holds is
   * the next holder's, but for what the device's queue now (taken back,
   * not adopting the send) holds too: those are that queue's to settle.
   */
  releaseAll(queue: DeviceQueue): void {
    const kept = new Set(this.#queues.get(queue.key)?.backlog.queue.map((item) => item.id));
    for (const item of queue.backlog.queue) if (!kept.has(item.id)) this.#held.delete(item.id);
  }

  /**
   * Lets go of a partition's queues: their timers stop, and what waits in
   * them is no longer held (fronts in flight stay held until settled).
   * Returns the keys let go.
   */
  letGo(partition: number): readonly string[] {
    const keys: string[] = [];
    for (const [key, queue] of this.#queues) {
      if (queue.partition !== partition) continue;
      clearTimeout(queue.timer);
      this.#queues.delete(key);
      keys.push(key);
      const inFlight = queue.backlog.inFlight ? queue.backlog.queue[0]?.id : undefined;
      for (const item of queue.backlog.queue) if (item.id !== inFlight) this.#held.delete(item.id);
      if (inFlight !== undefined) this.#outOfLetGo.add(inFlight);
    }
    return keys;
  }

  /** The queue moves on at `at` (its retry is due). */
  wakeAt(queue: DeviceQueue, at: number): void {
    clearTimeout(queue.timer);
    queue.timer = setTimeout(
      () => {
        queue.timer = undefined;
        this.#wake(queue.key);
      },
      Math.max(0, at - this.#now()),
    );
    queue.timer.unref();
  }

  /** Every queue's timer stopped (the scheduler closes). */
  stopTimers(): void {
    for (const queue of this.#queues.values()) clearTimeout(queue.timer);
  }

  #queueFor(key: string, first: PendingDelivery): DeviceQueue {
    let queue = this.#queues.get(key);
    if (queue === undefined) {
      queue = {
        key,
        partition: first.partition,
        origin: gatewayOrigin(first.url) ?? NOT_A_URL_ORIGIN,
        backlog: emptyBacklog(),
        checking: false,
      };
      this.#queues.set(key, queue);
    }
    return queue;
  }
}
