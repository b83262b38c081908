import type { GatewayExchange } from '../delivery/response-outcome.js';
import { refusal } from './checked-connector.js';

/** undici's errors that are not the network's or the gateway's doing: a closed client, a bad argument. */
const NOT_A_NETWORK_FAILURE = new Set([
  'UND_ERR_INVALID_ARG',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
  'UND_ERR_NOT_SUPPORTED',
  'UND_ERR_INVALID_RETURN_VALUE',
]);

/** A request that got no response, as an exchange. */
export function failedExchange(error: unknown): GatewayExchange {
  const refused = refusal(error);
  if (refused !== undefined) return { kind: 'address-refused', rule: refused.rule, reason: refused.reason };
  const code = errorCode(error);
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return { kind: 'timeout', phase: 'connect' };
  if (code === 'UND_ERR_HEADERS_TIMEOUT') return { kind: 'timeout', phase: 'headers' };
  if (code !== undefined && NOT_A_NETWORK_FAILURE.has(code)) throw error;
  return code === undefined ? { kind: 'connection-error' } : { kind: 'connection-error', reason: code };
}

export function errorCode(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code } = error as { code?: unknown };
  return typeof code === 'string' ? code : error.name;
}

export function firstValue(header: string | string[] | undefined): string | undefined {
  return Array.isArray(header) ? header[0] : header;
}
