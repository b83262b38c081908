import { expect } from 'vitest';
import type { Result } from '../../src/result/result.js';

/**
 * The contract's kind table, written out literally (not read from the
 * catalogue) so that a change to the catalogue fails the tests.
 */
export const CONTRACT_KINDS = {
  NotFound: { errcode: 'M_NOT_FOUND', status: 404 },
  InvalidParam: { errcode: 'M_INVALID_PARAM', status: 400 },
  MissingParam: { errcode: 'M_MISSING_PARAM', status: 400 },
  BadJson: { errcode: 'M_BAD_JSON', status: 400 },
  Unrecognized: { errcode: 'M_UNRECOGNIZED', status: 400 },
  Forbidden: { errcode: 'M_FORBIDDEN', status: 403 },
  TooLarge: { errcode: 'M_TOO_LARGE', status: 413 },
  Database: { errcode: 'M_UNKNOWN', status: 500 },
  Internal: { errcode: 'M_UNKNOWN', status: 500 },
  Unavailable: { errcode: 'M_UNKNOWN', status: 503 },
} as const;

export type ContractKind = keyof typeof CONTRACT_KINDS;

/** Asserts a refusal with its kind, errcode, status and exact message. */
export function expectError(result: Result<unknown>, kind: ContractKind, message: string | RegExp): void {
  expect(result.ok, `expected ${kind} but the operation succeeded`).toBe(false);
  if (result.ok) return;
  const body = result.error.toBody();
  expect({ kind: body.kind, errcode: body.errcode, status: body.status }).toEqual({ kind, ...CONTRACT_KINDS[kind] });
  if (typeof message === 'string') expect(body.error).toBe(message);
  else expect(body.error).toMatch(message);
}

export function expectOk<T>(result: Result<T>): T {
  if (!result.ok) throw new Error(`expected success, got ${result.error.kind}: ${result.error.message}`);
  return result.value;
}
