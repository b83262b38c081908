/** The part of an amqplib channel the batcher settles deliveries on. */
export interface AckChannel {
  ack(message: { readonly fields: { readonly deliveryTag: number } }, allUpTo?: boolean): void;
}

/**
 * Acknowledges answered requests with fewer frames: each ack is a frame the
 * worker writes (one socket write each) and the broker handles, as costly
 * as the reply itself on a small request.
 *
 * Acks wait at most until the next turn of the event loop (none when every
 * delivery open is answered: then at once). Then the oldest
 * run of answered deliveries goes in one `ack(tag, allUpTo)` — only a run
 * that starts at the oldest unsettled delivery, since `allUpTo` covers every
 * delivery up to that tag — and each answered delivery after a gap is acked
 * alone, so a slow request never holds back the acks of later ones (which
 * would stall the prefetch window).
 *
 * Delivery tags rise in delivery order on a channel; one batcher per channel.
 */
export class AckBatcher {
  readonly #channel: AckChannel;
  readonly #schedule: (flush: () => void) => void;
  /** Unsettled delivery tags, oldest first. */
  readonly #open: number[] = [];
  readonly #answered = new Set<number>();
  #scheduled = false;

  constructor(channel: AckChannel, schedule: (flush: () => void) => void = (flush) => setImmediate(flush)) {
    this.#channel = channel;
    this.#schedule = schedule;
  }

  /** A delivery arrived; call in delivery order. */
  delivered(tag: number): void {
    this.#open.push(tag);
  }

  /**
   * The delivery was answered: ack it soon, or now when it was the last one
   * open. A lone request (c = 1) is then acked in the same turn as its
   * reply, so both frames leave in one socket write instead of two; under
   * load the acks of a turn still go together.
   */
  answered(tag: number): void {
    this.#answered.add(tag);
    if (this.#answered.size === this.#open.length) {
      this.flush();
      return;
    }
    if (this.#scheduled) return;
    this.#scheduled = true;
    this.#schedule(() => {
      this.flush();
    });
  }

  /** The delivery was settled some other way (nack, reject): forget it. */
  settledElsewhere(tag: number): void {
    const at = this.#open.indexOf(tag);
    if (at >= 0) this.#open.splice(at, 1);
    this.#answered.delete(tag);
  }

  /** Sends every pending ack now (before the channel is closed). Throws if the channel is gone. */
  flush(): void {
    this.#scheduled = false;
    if (this.#answered.size === 0) return;
    let runEnd: number | undefined;
    while (this.#open.length > 0 && this.#answered.has(this.#open[0] ?? -1)) {
      runEnd = this.#open.shift();
      if (runEnd !== undefined) this.#answered.delete(runEnd);
    }
    const alone = [...this.#answered];
    this.#answered.clear();
    for (const tag of alone) {
      const at = this.#open.indexOf(tag);
      if (at >= 0) this.#open.splice(at, 1);
    }
    if (runEnd !== undefined) this.#channel.ack(delivery(runEnd), true);
    for (const tag of alone) this.#channel.ack(delivery(tag), false);
  }
}

function delivery(deliveryTag: number) {
  return { fields: { deliveryTag } };
}
