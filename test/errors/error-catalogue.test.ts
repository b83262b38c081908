import { describe, expect, it } from 'vitest';
import { ERROR_KINDS, MatrixError, MESSAGES } from '../../src/errors/error-catalogue.js';
import { CONTRACT_KINDS } from '../support/expect-result.js';
import { SEED } from '../support/seed-messages.js';

describe('error catalogue', () => {
  it('maps exactly the kinds of the contract table', () => {
    expect(Object.keys(ERROR_KINDS).sort()).toEqual(Object.keys(CONTRACT_KINDS).sort());
  });

  it.each(Object.entries(CONTRACT_KINDS))('%s has the contract errcode and status', (kind, expected) => {
    expect(ERROR_KINDS[kind as keyof typeof ERROR_KINDS]).toEqual(expected);
  });

  it.each(Object.entries(SEED))('holds the seed message %s verbatim', (_name, text) => {
    expect(Object.values(MESSAGES)).toContain(text);
  });

  it('builds the wire error body from the kind', () => {
    expect(new MatrixError('NotFound', SEED.ruleNotFound).toBody()).toEqual({
      kind: 'NotFound',
      errcode: 'M_NOT_FOUND',
      error: 'Push rule not found.',
      status: 404,
    });
  });
});
