/**
 * When each user's pushers last changed, as the change events told this
 * worker, so that a pending request is checked against the user's pushers
 * again only when they changed after it was planned (a logout, a
 * `delete_pushers`, a `set_pusher` with `kind: null`). Bounded: past `max`
 * users the oldest change is forgotten, and every request planned before a
 * forgotten change is checked again, as are all requests planned before a
 * moment when change events may have been missed (`forgetAll`).
 */
export class PusherChanges {
  readonly #max: number;
  /** Insertion order is change order: a user seen again is moved to the end. `tick`: the change's `#ticks`. */
  readonly #changedAt = new Map<string, { readonly at: number; readonly tick: number }>();
  /** Anything planned before this is checked again: a change before it may have been forgotten or missed. */
  #unknownBefore = Number.NEGATIVE_INFINITY;
  /**
   * Counts every change (and `forgetAll`): a check remembers the count it
   * started at, so that a change during the check is seen whatever the
   * clock says (two in one millisecond are still ordered).
   */
  #ticks = 0;
  #unknownBeforeTick = 0;

  constructor(max: number) {
    this.#max = max;
  }

  changed(userId: string, at: number): void {
    this.#ticks += 1;
    this.#changedAt.delete(userId);
    this.#changedAt.set(userId, { at, tick: this.#ticks });
    if (this.#changedAt.size <= this.#max) return;
    const [oldest, when] = this.#changedAt.entries().next().value as [string, { at: number; tick: number }];
    this.#changedAt.delete(oldest);
    this.#unknownBefore = Math.max(this.#unknownBefore, when.at);
    this.#unknownBeforeTick = Math.max(this.#unknownBeforeTick, when.tick);
  }

  /** Change events may have been missed until `at` (the subscription was lost). */
  forgetAll(at: number): void {
    this.#ticks += 1;
    this.#changedAt.clear();
    this.#unknownBefore = Math.max(this.#unknownBefore, at);
    this.#unknownBeforeTick = this.#ticks;
  }

  /** Where the count of changes stands: give it to `changedAfter` later. */
  get tick(): number {
    return this.#ticks;
  }

  /** Whether the user's pushers may have changed after the count stood at `tick`. */
  changedAfter(userId: string, tick: number): boolean {
    if (tick < this.#unknownBeforeTick) return true;
    const change = this.#changedAt.get(userId);
    return change !== undefined && change.tick > tick;
  }

  /** Whether the user's pushers may have changed at or after `plannedAt`. */
  changedSince(userId: string, plannedAt: number): boolean {
    if (plannedAt <= this.#unknownBefore) return true;
    const change = this.#changedAt.get(userId);
    return change !== undefined && change.at >= plannedAt;
  }
}
