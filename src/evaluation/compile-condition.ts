import { isCanonicalInteger, isJsonObject, type JsonValue } from '../matrix/json.js';
import type { PushCondition, ScalarJsonValue } from '../push-rules/push-rule.js';
import { foldCase } from './case-fold.js';
import type { ConditionTest } from './compiled-rule.js';
import type { FoldedText } from './folded-text.js';
import { containsLiteralAtWordBoundaries, globMatcher, GlobMatcher } from './glob-matcher.js';
import { CONDITION_BYTES, stringBytes } from './heap-estimate.js';
import { BoundedCache } from './bounded-cache.js';
import { parseKeyPath, valueAtPath, type KeyPath } from './key-path.js';
import { parseMemberCountComparison } from './member-count-comparison.js';
import type { PreparedEvent } from './prepared-event.js';

export interface CompiledCondition {
  readonly test: ConditionTest;
  /** The test looks at the recipient (display name, or the user ID of a shared ruleset). */
  readonly perRecipient: boolean;
  readonly estimatedBytes: number;
}

export interface ConditionOptions {
  /**
   * In a ruleset compiled once for many users: an `event_match` pattern or
   * an `event_property_is`/`event_property_contains` value equal to this
   * string stands for the recipient's user ID, resolved at evaluation.
   */
  readonly recipientPlaceholder?: string;
}

/**
 * Compiles one condition, or returns `null` for a condition that can never
 * match: an unknown kind, or a known kind whose fields are missing or of the
 * wrong type (the spec: unrecognised conditions must not match). A rule
 * holding one can never match either.
 */
export function compileCondition(condition: PushCondition, options: ConditionOptions = {}): CompiledCondition | null {
  const fields: unknown = condition;
  if (!isJsonObject(fields)) return null;
  const key = fields['key'];
  switch (fields['kind']) {
    case 'event_match': {
      const pattern = fields['pattern'];
      if (typeof key !== 'string' || typeof pattern !== 'string') return null;
      return eventMatch(key, pattern, options);
    }
    case 'event_property_is':
    case 'event_property_contains': {
      const value = fields['value'];
      if (typeof key !== 'string' || !Object.hasOwn(fields, 'value') || !isScalar(value)) return null;
      return fields['kind'] === 'event_property_is'
        ? propertyIs(key, value, options)
        : propertyContains(key, value, options);
    }
    case 'contains_display_name':
      return { test: containsDisplayName, perRecipient: true, estimatedBytes: 0 };
    case 'room_member_count': {
      const is = fields['is'];
      const compare = typeof is === 'string' ? parseMemberCountComparison(is) : undefined;
      if (compare === undefined) return null;
      return {
        test: (event) => compare(event.room.member_count),
        perRecipient: false,
        estimatedBytes: CONDITION_BYTES,
      };
    }
    case 'sender_notification_permission':
      return typeof key === 'string' ? senderNotificationPermission(key) : null;
    default:
      return null;
  }
}

/** Rules of every user name the same few keys: one parsed path, and one set of key strings, per key. */
const KEY_PATHS = new BoundedCache<string, KeyPath>(4096);
const keyPath = (key: string): KeyPath => KEY_PATHS.getOrCreate(key, parseKeyPath);

function isScalar(value: JsonValue | undefined): value is ScalarJsonValue {
  return value === null || typeof value === 'string' || typeof value === 'boolean' || isCanonicalInteger(value);
}

function isContentBody(path: KeyPath): boolean {
  return path.length === 2 && path[0] === 'content' && path[1] === 'body';
}

/** The string at `path`, folded; `null` when there is none. */
function textAt(event: PreparedEvent, path: KeyPath): FoldedText | null {
  const value = valueAtPath(event.event, path);
  return typeof value === 'string' ? event.text(value) : null;
}

function eventMatch(key: string, pattern: string, options: ConditionOptions): CompiledCondition {
  const path = keyPath(key);
  const onBody = isContentBody(path);
  const bytes = CONDITION_BYTES;
  if (pattern === options.recipientPlaceholder) {
    return { test: onBody ? recipientIdInBody : recipientIdIsValueAt(path), perRecipient: true, estimatedBytes: bytes };
  }
  const matcher = globMatcher(pattern);
  // The pattern, and its matcher (shared through the cache, counted here all the same).
  const estimatedBytes = bytes + stringBytes(pattern) * 2;
  if (onBody) {
    return {
      test: (event) => {
        const body = event.body();
        return body !== null && matcher.matchesAtWordBoundaries(body);
      },
      perRecipient: false,
      estimatedBytes,
    };
  }
  if (matcher.isLiteral) {
    // The commonest condition (`type`, `content.msgtype`): folding keeps
    // lengths, so a value of another length is rejected without folding,
    // and one equal as sent without folding either.
    const folded = matcher.folded;
    return {
      test: (event) => {
        const value = valueAtPath(event.event, path);
        if (typeof value !== 'string' || value.length !== pattern.length) return false;
        if (value === pattern) return true;
        const ascii = asciiCaseInsensitiveEquals(value, folded);
        return ascii === undefined ? event.text(value).folded === folded : ascii;
      },
      perRecipient: false,
      estimatedBytes,
    };
  }
  return {
    test: (event) => {
      const text = textAt(event, path);
      return text !== null && matcher.matchesWhole(text);
    },
    perRecipient: false,
    estimatedBytes,
  };
}

/**
 * Compares a value with a folded literal of the same length without folding
 * the value, while both are ASCII (folding ASCII is lower-casing A-Z); this
 * settles most mismatches (`m.room.tombstone` against `m.room.encrypted`)
 * without allocating. `undefined` when a non-ASCII character needs the real
 * folding.
 */
function asciiCaseInsensitiveEquals(value: string, foldedLiteral: string): boolean | undefined {
  for (let i = 0; i < value.length; i += 1) {
    const unit = value.charCodeAt(i);
    const expected = foldedLiteral.charCodeAt(i);
    if (unit >= 0x80 || expected >= 0x80) return undefined;
    if (unit !== expected && !(unit >= 0x41 && unit <= 0x5a && unit + 0x20 === expected)) return false;
  }
  return true;
}

/**
 * The recipient's user ID used as a glob, as the server-default rules use it
 * once substituted. User IDs normally hold no `*` or `?`; when one does, it
 * is a glob like any other pattern (compiled here, not cached: there is one
 * per user).
 */
function userIdMatcher(userId: string): GlobMatcher | null {
  return userId.includes('*') || userId.includes('?') ? new GlobMatcher(userId) : null;
}

function recipientIdIsValueAt(path: KeyPath): ConditionTest {
  return (event, recipient) => {
    const value = valueAtPath(event.event, path);
    const userId = recipient.user_id;
    if (typeof value !== 'string') return false;
    const glob = userIdMatcher(userId);
    if (glob !== null) return glob.matchesWhole(event.text(value));
    return value.length === userId.length && (value === userId || event.text(value).folded === foldCase(userId));
  };
}

const recipientIdInBody: ConditionTest = (event, recipient) => {
  const body = event.body();
  if (body === null) return false;
  const glob = userIdMatcher(recipient.user_id);
  if (glob !== null) return glob.matchesAtWordBoundaries(body);
  return containsLiteralAtWordBoundaries(body, foldCase(recipient.user_id));
};

function propertyIs(key: string, value: ScalarJsonValue, options: ConditionOptions): CompiledCondition {
  const path = keyPath(key);
  const estimatedBytes = CONDITION_BYTES + (typeof value === 'string' ? stringBytes(value) : 0);
  if (value === options.recipientPlaceholder) {
    return {
      test: (event, recipient) => valueAtPath(event.event, path) === recipient.user_id,
      perRecipient: true,
      estimatedBytes,
    };
  }
  // Strict equality is the spec's "same type, same value": JSON numbers are
  // JavaScript numbers, and no object or array equals a scalar.
  return { test: (event) => valueAtPath(event.event, path) === value, perRecipient: false, estimatedBytes };
}

function arrayIncludes(candidate: JsonValue | undefined, value: ScalarJsonValue): boolean {
  return Array.isArray(candidate) && (candidate as readonly JsonValue[]).includes(value);
}

function propertyContains(key: string, value: ScalarJsonValue, options: ConditionOptions): CompiledCondition {
  const path = keyPath(key);
  const estimatedBytes = CONDITION_BYTES + (typeof value === 'string' ? stringBytes(value) : 0);
  if (value === options.recipientPlaceholder) {
    return {
      test: (event, recipient) => arrayIncludes(valueAtPath(event.event, path), recipient.user_id),
      perRecipient: true,
      estimatedBytes,
    };
  }
  return { test: (event) => arrayIncludes(valueAtPath(event.event, path), value), perRecipient: false, estimatedBytes };
}

/** The deprecated condition: the display name as a literal, at word boundaries, case-insensitively. */
const containsDisplayName: ConditionTest = (event, recipient) => {
  const name = recipient.display_name;
  if (name === undefined || name === '') return false;
  const body = event.body();
  return body !== null && containsLiteralAtWordBoundaries(body, foldCase(name));
};

/**
 * The sender's level against the room's level for `key`. An absent sender
 * level never matches; an absent `room` level is 50; any other absent level
 * never matches (Synapse assumes 50 there; see docs/push-rules.md#evaluation).
 */
function senderNotificationPermission(key: string): CompiledCondition {
  const test: ConditionTest = (event) => {
    const { sender_power_level: senderLevel, notification_power_levels: levels } = event.room;
    if (typeof senderLevel !== 'number') return false;
    const required = levels !== undefined && Object.hasOwn(levels, key) ? levels[key] : key === 'room' ? 50 : undefined;
    return typeof required === 'number' && senderLevel >= required;
  };
  return { test, perRecipient: false, estimatedBytes: CONDITION_BYTES + stringBytes(key) };
}
