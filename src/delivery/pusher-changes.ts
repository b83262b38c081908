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
  /** Insertion order is change order: a user seen again is moved to the end. */
  readonly #changedAt = new Map<string, number>();
  /** Anything planned before this is checked again: a change before it may have been forgotten or missed. */
  #unknownBefore = Number.NEGATIVE_INFINITY;

  constructor(max: number) {
    this.#max = max;
  }

  changed(userId: string, at: number): void {
    this.#changedAt.delete(userId);
    this.#changedAt.set(userId, at);
    if (this.#changedAt.size <= this.#max) return;
    const [oldest, when] = this.#changedAt.entries().next().value as [string, number];
    this.#changedAt.delete(oldest);
    this.#unknownBefore = Math.max(this.#unknownBefore, when);
  }

  /** Change events may have been missed until `at` (the subscription was lost). */
  forgetAll(at: number): void {
    this.#changedAt.clear();
    this.#unknownBefore = Math.max(this.#unknownBefore, at);
  }

  /** Whether the user's pushers may have changed at or after `plannedAt`. */
  changedSince(userId: string, plannedAt: number): boolean {
    if (plannedAt <= this.#unknownBefore) return true;
    const at = this.#changedAt.get(userId);
    return at !== undefined && at >= plannedAt;
  }
}
