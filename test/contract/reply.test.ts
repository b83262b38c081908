import { describe, expect, it } from 'vitest';
import { serverDefaultRuleset } from '../../src/push-rules/server-default-rules.js';
import { encodeRulesetContent, rulesetContentJson } from '../../src/push-rules/decode-ruleset.js';
import { encodeReply, success, successEncoded } from '../../src/contract/reply.js';

describe('encodeReply', () => {
  it('gives the text JSON.stringify gives, for a body encoded beforehand too', () => {
    const ruleset = serverDefaultRuleset('@a:example.org');
    const encoded = successEncoded(encodeRulesetContent(ruleset), rulesetContentJson(ruleset));
    expect(encodeReply(encoded)).toBe(JSON.stringify(encoded));
    expect(encodeReply(encoded)).toBe(JSON.stringify(success({ global: ruleset })));
    expect(JSON.parse(encodeReply(encoded))).toEqual({ ok: true, body: { global: ruleset } });
  });

  it('uses the text given with the body, and encodes anything else', () => {
    const body = { global: 'x' };
    expect(encodeReply(successEncoded(body, '"as given"'))).toBe('{"ok":true,"body":"as given"}');
    expect(encodeReply(success({ global: 'x' }))).toBe('{"ok":true,"body":{"global":"x"}}');
    expect(encodeReply({ user_id: '@a:example.org', type: 'm.push_rules', version: 2 })).toBe(
      '{"user_id":"@a:example.org","type":"m.push_rules","version":2}',
    );
  });
});
