import type { buildConnector } from 'undici';
import { type AddressVerdict, checkAddress } from '../delivery/address-policy.js';
import type { CidrRange } from '../delivery/cidr.js';

/** A connection the address policy refused; carried through Node and undici to `failedExchange`. */
export class AddressRefusedError extends Error {
  readonly rule: string;
  readonly reason: string;

  constructor(verdict: Extract<AddressVerdict, { allowed: false }>) {
    super(`address refused: ${verdict.reason}`);
    this.name = 'AddressRefusedError';
    this.rule = verdict.rule;
    this.reason = verdict.reason;
  }
}

/**
 * undici's connector, with the address policy around it: the address (the
 * gateway client only ever connects to IP addresses, see its `#exchange`) is checked
 * before any connection is opened, anything else refused, so that no name
 * is ever looked up here; and a connected socket whose peer address is
 * refused is destroyed before undici writes on it, whatever led there.
 */
export function checkedConnector(
  connect: buildConnector.connector,
  allowlist: readonly CidrRange[],
): buildConnector.connector {
  return (options, callback) => {
    // undici takes an IPv6 origin's brackets off before it calls here; not a promise this check should rest on.
    const host = options.hostname.startsWith('[') ? options.hostname.slice(1, -1) : options.hostname;
    const verdict = checkAddress(host, allowlist);
    if (!verdict.allowed) {
      // Asynchronously, as a connection attempt ends: undici does not expect its callback within the call.
      queueMicrotask(() => {
        callback(new AddressRefusedError(verdict), null);
      });
      return;
    }
    connect(options, (error, socket) => {
      if (error !== null) {
        callback(error, null);
        return;
      }
      const peer = socket.remoteAddress;
      if (peer === undefined) {
        // Closed as soon as it opened: nothing to check, nothing sent, worth another try.
        socket.destroy();
        const closed = Object.assign(new Error('the connection closed before its address could be checked'), {
          code: 'ERR_SOCKET_CLOSED',
        });
        callback(closed, null);
        return;
      }
      const verdict = checkAddress(peer, allowlist);
      if (!verdict.allowed) {
        socket.destroy();
        callback(new AddressRefusedError(verdict), null);
        return;
      }
      callback(null, socket);
    });
  };
}

/** The refusal that ended a connection attempt, wherever Node or undici put it (the error or one of its causes). */
export function refusal(error: unknown): AddressRefusedError | undefined {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 5; cause = cause.cause, depth += 1) {
    if (cause instanceof AddressRefusedError) return cause;
  }
  return undefined;
}
