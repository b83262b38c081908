/** The seed specification's message texts, copied verbatim from its section 4. */
export const SEED = {
  scope: "Scopes other than 'global' are not supported.",
  eventNotFound: 'PushRules event not found.',
  ruleNotFound: 'Push rule not found.',
  dotReserved: 'Rule IDs starting with a dot are reserved for server-default rules.',
  invalidChars: 'Rule ID containing invalid characters.',
  relativeToDefault: "Can't place a push rule relatively to a server-default rule.",
  placementNotFound: 'The before or after rule could not be found.',
  beforeAboveAfter: 'The before rule has a higher priority than the after rule.',
  invalidData: 'Invalid data.',
  deleteDefault: 'Cannot delete a server-default pushrule.',
} as const;
