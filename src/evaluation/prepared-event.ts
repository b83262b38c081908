import type { CompiledRuleset, RecipientPlan } from './compiled-ruleset.js';
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
  private planRuleset: CompiledRuleset | undefined;
  private firstPlan: RecipientPlan | undefined;
  private plans: Map<CompiledRuleset, RecipientPlan> | undefined;

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
   */
  plan(ruleset: CompiledRuleset, build: (event: PreparedEvent, ruleset: CompiledRuleset) => RecipientPlan): RecipientPlan {
    if (ruleset === this.planRuleset && this.firstPlan !== undefined) return this.firstPlan;
    if (this.planRuleset === undefined) {
      this.planRuleset = ruleset;
      this.firstPlan = build(this, ruleset);
      return this.firstPlan;
    }
    this.plans ??= new Map();
    let plan = this.plans.get(ruleset);
    if (plan === undefined) {
      plan = build(this, ruleset);
      this.plans.set(ruleset, plan);
    }
    return plan;
  }
}

export function prepareEvent(event: EvaluationEvent, room: EvaluationRoom): PreparedEvent {
  return new PreparedEvent(event, room);
}
