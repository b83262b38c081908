import { describe, expect, it } from 'vitest';
import { parseKeyPath, valueAtPath } from '../../src/evaluation/key-path.js';
import type { JsonObject } from '../../src/matrix/json.js';

describe('parseKeyPath', () => {
  it.each([
    ['content.body', ['content', 'body']],
    ['type', ['type']],
    ['content.m\\.relates_to.rel_type', ['content', 'm.relates_to', 'rel_type']],
    ['content.m\\.mentions.user_ids', ['content', 'm.mentions', 'user_ids']],
    // `\\` is one literal backslash; the dot after it splits.
    ['content.a\\\\.b', ['content', 'a\\', 'b']],
    ['content.a\\\\\\.b', ['content', 'a\\.b']],
    // evaluation.md: a backslash before anything else stays (Synapse drops the key).
    ['content.org\\example', ['content', 'org\\example']],
    ['content.m\\x', ['content', 'm\\x']],
    ['trailing\\', ['trailing\\']],
    ['', ['']],
    ['a..b', ['a', '', 'b']],
    ['.a', ['', 'a']],
  ])('%s → %j', (key, segments) => {
    expect(parseKeyPath(key)).toEqual(segments);
  });
});

describe('valueAtPath', () => {
  const event: JsonObject = {
    type: 'm.room.message',
    content: {
      body: 'hi',
      'm.relates_to': { rel_type: 'm.thread' },
      list: ['a', { inner: 'x' }],
      'org\\example': 'found',
      '': { '': 'empty keys' },
      nothing: null,
    },
    __proto__: { polluted: 'own property only' },
  };

  it.each([
    ['type', 'm.room.message'],
    ['content.body', 'hi'],
    ['content.m\\.relates_to.rel_type', 'm.thread'],
    ['content.org\\example', 'found'],
    ['content..', 'empty keys'],
    ['content.nothing', null],
  ])('%s finds %j', (key, value) => {
    expect(valueAtPath(event, parseKeyPath(key))).toEqual(value);
  });

  it.each([
    ['content.absent', 'a key that is not there'],
    ['content.body.length', 'a path through a string'],
    ['content.list.0', 'a path through an array'],
    ['content.list.1.inner', 'a path through an array to an object'],
    ['content.nothing.x', 'a path through null'],
    ['content.constructor', 'an inherited property'],
    ['content.toString', 'an inherited method'],
    ['content.m.relates_to', 'unescaped dots split the key'],
  ])('%s has no value (%s)', (key) => {
    expect(valueAtPath(event, parseKeyPath(key))).toBeUndefined();
  });

  it('reads an own __proto__ key as data, not the prototype', () => {
    const parsed = JSON.parse('{"content": {"__proto__": {"x": "own"}}}') as JsonObject;
    expect(valueAtPath(parsed, parseKeyPath('content.__proto__.x'))).toBe('own');
    expect(valueAtPath({ content: {} }, parseKeyPath('content.__proto__'))).toBeUndefined();
  });
});
