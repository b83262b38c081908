import type { MatrixError } from '../errors/error-catalogue.js';

/**
 * The domain core never throws for a client's mistake: it returns one of
 * these, so callers cannot forget that an operation can be refused.
 */
export type Result<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: MatrixError };

export function ok<T>(value: T): Result<T> {
  return { ok: true, value };
}

export function fail<T = never>(error: MatrixError): Result<T> {
  return { ok: false, error };
}

export function mapResult<T, U>(result: Result<T>, map: (value: T) => U): Result<U> {
  return result.ok ? ok(map(result.value)) : result;
}
