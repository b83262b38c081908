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
