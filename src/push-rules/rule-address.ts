/** How single-rule operations name a rule: `{scope}/{kind}/{ruleId}`. */
export interface RuleAddress {
  readonly scope: string;
  /** Any string: an unknown kind is a rule that does not exist. */
  readonly kind: string;
  readonly ruleId: string;
}
