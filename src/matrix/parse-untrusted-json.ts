import { LIMIT_MESSAGES, REQUEST_MESSAGES } from '../errors/error-catalogue.js';
import type { JsonValue } from './json.js';
import { nestsDeeperThan } from './json-depth.js';
import { findInJson } from './walk-json.js';

/** Why JSON text from outside was refused; the worker and the gateway each answer it in their own terms. */
export type UntrustedJsonProblem = 'not-json' | 'too-deep' | 'forbidden-key';

/**
 * Keys that reach an object's prototype when a parsed value is later
 * assigned or merged (`Object.assign`, `target[key] = …`, a deep merge).
 * `JSON.parse` itself makes them plain own properties, so refusing them at
 * the edge keeps every later step safe without each one having to care.
 */
export const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

export type UntrustedJson =
  | { readonly ok: true; readonly value: JsonValue }
  | { readonly ok: false; readonly problem: UntrustedJsonProblem; readonly message: string };

export interface UntrustedJsonLimits {
  /** Arrays and objects nested deeper than this are refused before the text is parsed. */
  readonly maxDepth: number;
}

/**
 * Parses JSON text that a request sent. The depth is checked first, by a
 * scan of the text, so that pathological nesting never reaches `JSON.parse`
 * nor anything that walks the result recursively afterwards. Then any key
 * of `FORBIDDEN_KEYS`, at any depth, refuses the whole text, naming its path.
 */
export function parseUntrustedJson(text: string, limits: UntrustedJsonLimits): UntrustedJson {
  if (nestsDeeperThan(text, limits.maxDepth)) {
    return { ok: false, problem: 'too-deep', message: LIMIT_MESSAGES.jsonTooDeep(limits.maxDepth) };
  }
  let value: JsonValue;
  try {
    value = JSON.parse(text) as JsonValue;
  } catch (error) {
    return { ok: false, problem: 'not-json', message: (error as Error).message };
  }
  const forbidden = findInJson(value, (node) =>
    node.key !== undefined && FORBIDDEN_KEYS.has(node.key) ? node.path : undefined,
  );
  if (forbidden !== undefined)
    return { ok: false, problem: 'forbidden-key', message: REQUEST_MESSAGES.forbiddenKey(forbidden) };
  return { ok: true, value };
}
