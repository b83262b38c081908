import type { SynapsePushRuleEnableRow, SynapsePushRuleRow, SynapsePusherRow } from '../../src/import/synapse-rows.js';
import { ALICE } from './builders.js';

/** A user override rule of Alice's, as Synapse stores it. */
export function aRuleRow(overrides: Partial<SynapsePushRuleRow> = {}): SynapsePushRuleRow {
  return {
    user_name: ALICE,
    rule_id: 'global/override/my.rule',
    priority_class: 5,
    priority: 0,
    conditions: '[{"kind":"event_match","key":"content.body","pattern":"cake"}]',
    actions: '["notify"]',
    ...overrides,
  };
}

/** The dummy row Synapse writes when Alice changes a server-default rule's actions. */
export function aChangedDefaultRow(ruleId: string, actions: string): SynapsePushRuleRow {
  return aRuleRow({ rule_id: ruleId, priority_class: -1, priority: 1, conditions: '[]', actions });
}

export function anEnableRow(ruleId: string, enabled: SynapsePushRuleEnableRow['enabled']): SynapsePushRuleEnableRow {
  return { user_name: ALICE, rule_id: ruleId, enabled };
}

/** An HTTP pusher of Alice's, as Synapse 1.69 and later store it. */
export function aPusherRow(overrides: Partial<SynapsePusherRow> = {}): SynapsePusherRow {
  return {
    user_name: ALICE,
    access_token: 7,
    profile_tag: '',
    kind: 'http',
    app_id: 'org.example.app',
    app_display_name: 'Example',
    device_display_name: 'Phone',
    pushkey: 'pushkey-1',
    ts: 1_700_000_000_000,
    lang: 'en',
    data: '{"url":"https://push.example.org/_matrix/push/v1/notify","format":"event_id_only"}',
    enabled: 1,
    device_id: 'DEVICE1',
    ...overrides,
  };
}
