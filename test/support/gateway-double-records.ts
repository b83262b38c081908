import type { IncomingHttpHeaders } from 'node:http';

/** What the push gateway double (push-gateway-double.ts) keeps of the requests it received. */

/** One request the double received, whatever it was. */
export interface RecordedRequest {
  /** When its body had been read (ms since the epoch, comparable across processes). */
  readonly at: number;
  readonly method: string;
  /** The path with its query, as requested. */
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  /** The body as received (UTF-8), empty when it was too large to keep. */
  readonly rawBody: string;
  /** The body parsed as JSON, `undefined` when it was not JSON. */
  readonly body: unknown;
  /** The pushkeys of its devices, in order, when it was a valid notify request; else empty. */
  readonly pushkeys: readonly string[];
  /** What the double did: the status it sent (or will send after a delay or once held ones are answered), `hang` or `reset`. */
  readonly answer: number | 'hang' | 'reset';
}

/**
 * What the double keeps of each request. `full`: every request whole
 * (`requests`), for tests that look at headers and bodies. `light`: only
 * `stats` and `deviceLog`, for the bench, which sends tens of thousands of
 * requests and must not measure a double that holds every body.
 */
export type Recording = 'full' | 'light';

/** Counts over every request received since the start or the last `clearRequests`, in both recordings. */
export interface GatewayStats {
  readonly requests: number;
  /** Requests by what the double did: the status as a string, `hang` or `reset`. */
  readonly answers: Readonly<Record<string, number>>;
  /** Devices of the requests answered 200 (the devices a worker counts as delivered, rejected ones included). */
  readonly devicesDelivered: number;
  /** When the first and the last request had been read (ms since the epoch); undefined before any. */
  readonly firstAt: number | undefined;
  readonly lastAt: number | undefined;
}

/** One notification a device got in a request answered 200. */
export interface DeviceDelivery {
  /** The notification's `event_id`; empty for a badge update (none). */
  readonly eventId: string;
  /** When the request had been read (ms since the epoch). */
  readonly at: number;
}
