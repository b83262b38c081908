import { expect } from 'vitest';

/**
 * Request bodies carrying a key that reaches an object's prototype once the
 * value is assigned or merged somewhere. Written as JSON text: in a
 * JavaScript literal, `__proto__: …` would set the literal's prototype
 * instead of making a key.
 */
export const POISON_KEYS = ['__proto__', 'constructor', 'prototype'] as const;

/** What each body tries to slip onto `Object.prototype`. */
const PAYLOAD = '{"polluted": "yes", "prototype": {"polluted": "yes"}}';
const PUSH_URL = 'https://push.example.org/_matrix/push/v1/notify';

export interface PoisonedPlace {
  /** Where the key sits, in words. */
  readonly place: string;
  /** The worker's request, as JSON text. */
  readonly request: (userId: string, key: string) => string;
  /** The key's path in the worker's request, as the error names it. */
  readonly requestPath: (key: string) => string;
  /** The same body sent to the gateway, relative to `/_matrix/client/v3/`. */
  readonly http: { readonly method: 'PUT' | 'POST'; readonly path: string; readonly body: (key: string) => string };
  /** The key's path in the HTTP body. */
  readonly httpPath: (key: string) => string;
}

const pusher = (extra: string) =>
  `{"kind": "http", "app_id": "org.example.poison", "pushkey": "poison", "app_display_name": "P", "device_display_name": "P", "lang": "en", ` +
  `"data": {"url": "${PUSH_URL}"${extra}}}`;
const ruleBody = (conditionExtra: string) =>
  `{"actions": ["notify"], "conditions": [{"kind": "event_match", "key": "content.body", "pattern": "x"${conditionExtra}}]}`;
const address = `"scope": "global", "kind": "override", "rule_id": "poison"`;

export const POISONED_PLACES: readonly PoisonedPlace[] = [
  {
    place: 'a rule condition',
    request: (user, key) =>
      `{"op": "set_pushrule", "user_id": "${user}", ${address}, "rule": ${ruleBody(`, "${key}": ${PAYLOAD}`)}}`,
    requestPath: (key) => `rule.conditions.0.${key}`,
    http: {
      method: 'PUT',
      path: 'pushrules/global/override/poison',
      body: (key) => ruleBody(`, "${key}": ${PAYLOAD}`),
    },
    httpPath: (key) => `conditions.0.${key}`,
  },
  {
    place: 'a tweak value object',
    request: (user, key) =>
      `{"op": "set_pushrule_actions", "user_id": "${user}", ${address}, "actions": [{"set_tweak": "org.example", "value": {"${key}": ${PAYLOAD}}}]}`,
    requestPath: (key) => `actions.0.value.${key}`,
    http: {
      method: 'PUT',
      path: 'pushrules/global/override/poison/actions',
      body: (key) => `{"actions": [{"set_tweak": "org.example", "value": {"${key}": ${PAYLOAD}}}]}`,
    },
    httpPath: (key) => `actions.0.value.${key}`,
  },
  {
    place: 'pusher data',
    request: (user, key) => `{"op": "set_pusher", "user_id": "${user}", "action": ${pusher(`, "${key}": ${PAYLOAD}`)}}`,
    requestPath: (key) => `action.data.${key}`,
    http: { method: 'POST', path: 'pushers/set', body: (key) => pusher(`, "${key}": ${PAYLOAD}`) },
    httpPath: (key) => `data.${key}`,
  },
  {
    place: 'the top level',
    request: (user, key) => `{"${key}": ${PAYLOAD}, "op": "set_pusher", "user_id": "${user}", "action": ${pusher('')}}`,
    requestPath: (key) => key,
    http: { method: 'POST', path: 'pushers/set', body: (key) => `{"${key}": ${PAYLOAD}, ${pusher('').slice(1)}` },
    httpPath: (key) => key,
  },
];

/** Every key at every place: `[place, key, the place]` rows for `it.each`. */
export const POISONED_CASES = POISONED_PLACES.flatMap((place) =>
  POISON_KEYS.map((key) => [place.place, key, place] as const),
);

/** The message a refusal names the key with. */
export const forbiddenKeyMessage = (path: string) =>
  `Key not accepted: ${path} (__proto__, constructor and prototype are refused anywhere in a request).`;

/** Asserts that nothing reached `Object.prototype` since `before` was taken. */
export function expectCleanPrototype(before: readonly string[]): void {
  expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual([...before].sort());
}

export const prototypeKeys = (): readonly string[] => Object.getOwnPropertyNames(Object.prototype);
