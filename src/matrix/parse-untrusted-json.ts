import { LIMIT_MESSAGES } from '../errors/error-catalogue.js';
import type { JsonValue } from './json.js';
import { nestsDeeperThan } from './json-depth.js';

/** Why JSON text from outside was refused; the worker and the gateway each answer it in their own terms. */
export type UntrustedJsonProblem = 'not-json' | 'too-deep';

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
 * nor anything that walks the result recursively afterwards.
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
  return { ok: true, value };
}
