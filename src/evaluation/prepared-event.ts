import type { EvaluationEvent, EvaluationRoom } from './evaluation-input.js';
import { FoldedText } from './folded-text.js';

/**
 * One event, prepared once and shared by every recipient it is evaluated
 * for. Nothing is computed up front: an encrypted event never folds a body,
 * and a fan-out of one recipient pays only for what its rules look at.
 */
export class PreparedEvent {
  private bodyText: FoldedText | null | undefined;
  private texts: Map<string, FoldedText> | undefined;
  // Nearly every request involves one shared ruleset (the defaults): its
  // plan has a slot of its own, and a map is made only for a second one.
  // Keyed by the ruleset object; what a plan is, is the caller's business
  // (evaluate-recipient.ts), so that this file depends on no ruleset type.
  private planKey: object | undefined;
  private firstPlan: unknown;
  private plans: Map<object, unknown> | undefined;

  constructor(
    readonly event: EvaluationEvent,
    readonly room: EvaluationRoom,
  ) {}

  /** `content.body` folded, or `null` when it is absent or not a string. */
  body(): FoldedText | null {
    if (this.bodyText === undefined) {
      const body = this.event.content['body'];
      this.bodyText = typeof body === 'string' ? this.text(body) : null;
    }
    return this.bodyText;
  }

  /** A string of this event, folded once however many rules look at it. */
  text(value: string): FoldedText {
    this.texts ??= new Map();
    let text = this.texts.get(value);
    if (text === undefined) {
      text = new FoldedText(value);
      this.texts.set(value, text);
    }
    return text;
  }

  /**
   * The part of a shared ruleset's evaluation that is the same for every
   * recipient of this event, built on first use (see `evaluate-recipient.ts`).
   * One `build` per key: the plan stored for a key is what `build` made.
   */
  plan<K extends object, P>(key: K, build: (event: PreparedEvent, key: K) => P): P {
    if (key === this.planKey && this.firstPlan !== undefined) return this.firstPlan as P;
    if (this.planKey === undefined) {
      this.planKey = key;
      const first = build(this, key);
      this.firstPlan = first;
      return first;
    }
    this.plans ??= new Map();
    if (this.plans.has(key)) return this.plans.get(key) as P;
    const plan = build(this, key);
    this.plans.set(key, plan);
    return plan;
  }
}

export function prepareEvent(event: EvaluationEvent, room: EvaluationRoom): PreparedEvent {
  return new PreparedEvent(event, room);
}
