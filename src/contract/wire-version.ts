/**
 * The wire version of the RPC contract (docs/rpc-contract.md#wire-version):
 * carried in the AMQP header `x-push-wire-version` of requests, replies and
 * change events, as an integer. It grows by one with every change of the
 * contract/ files a caller could notice (additions too); a worker serves
 * every version from 1 to its own, each as that version specifies it.
 */
export const WIRE_VERSION = 1;

export const WIRE_VERSION_HEADER = 'x-push-wire-version';

/** The header every message a worker or the client publishes carries. */
export const WIRE_VERSION_HEADERS: Readonly<Record<string, number>> = { [WIRE_VERSION_HEADER]: WIRE_VERSION };

/**
 * The version a request asks for: 1 without the header (callers that
 * predate it speak version 1), its value when it is an integer from 1 to
 * `WIRE_VERSION`; otherwise the refusal's text (a newer caller than this
 * worker, or a value that is no version).
 */
export function requestedWireVersion(
  headers: Readonly<Record<string, unknown>> | undefined,
): { readonly ok: true; readonly version: number } | { readonly ok: false; readonly message: string } {
  const value = headers?.[WIRE_VERSION_HEADER];
  if (value === undefined) return { ok: true, version: 1 };
  // A header set from text by some clients (and by RabbitMQ's management UI) arrives as a string.
  const version = typeof value === 'string' && /^[0-9]{1,9}$/.test(value) ? Number(value) : value;
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1)
    return { ok: false, message: `${WIRE_VERSION_HEADER} must be a positive integer.` };
  if (version > WIRE_VERSION)
    return {
      ok: false,
      message: `This worker speaks wire versions 1 to ${WIRE_VERSION}; the request asks for ${version}. Nothing was changed: send it again once every worker is upgraded, or as version ${WIRE_VERSION}.`,
    };
  return { ok: true, version };
}
