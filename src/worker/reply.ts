import type { MatrixError, MatrixErrorBody } from '../errors/error-catalogue.js';

/** The contract's reply envelope. */
export type Reply = { readonly ok: true; readonly body: unknown } | { readonly ok: false; readonly error: MatrixErrorBody };

export function success(body: unknown): Reply {
  return { ok: true, body };
}

export function failure(error: MatrixError): Reply {
  return { ok: false, error: error.toBody() };
}
