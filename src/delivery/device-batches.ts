import type { StoredPusher } from '../pushers/pusher.js';

/**
 * The part of a stored pusher that delivery reads, plus when its pushkey was
 * set. Stored pushers carry no timestamp yet: the pusher store will supply
 * `pushkeyTsMs` (when the pusher was created or last updated) once it records
 * one; the gateway gets it in seconds as `pushkey_ts`.
 */
export type DeliveryPusher = Pick<StoredPusher, 'user_id' | 'kind' | 'app_id' | 'pushkey' | 'data' | 'enabled'> & {
  readonly pushkeyTsMs: number;
};

/** Devices sent in one request: one user's pushers with one gateway URL and one format. */
export interface DeviceBatch {
  readonly userId: string;
  /** The pushers' `data.url`, exactly: where the request goes. */
  readonly url: string;
  /** The pushers' `data.format`; absent for the full format. */
  readonly format?: string;
  /** In the order the pushers were given; no two with the same pushkey. */
  readonly pushers: readonly DeliveryPusher[];
}

export interface DeviceBatches {
  /** In the order of each batch's first pusher. */
  readonly batches: readonly DeviceBatch[];
  /**
   * Enabled e-mail pushers: this service sends no mail, so they get nothing,
   * but they are handed back for the caller to count.
   */
  readonly emailPushers: readonly DeliveryPusher[];
}

/**
 * Groups a recipient's pushers into the requests to send: one request per
 * gateway URL and format, since the push gateway API takes a list of devices
 * and one request costs the gateway (and the connection pool) far less than
 * three. Disabled pushers and HTTP pushers without a URL get nothing.
 *
 * Pushers of different users never share a request even if given together:
 * the counts in the body are one user's.
 *
 * Two pushers with the same pushkey (under different app IDs) go in
 * different requests: the gateway rejects by pushkey alone, and a rejection
 * must name exactly one pusher to remove.
 */
export function batchDevices(pushers: readonly DeliveryPusher[]): DeviceBatches {
  const batches: MutableBatch[] = [];
  const byAddress = new Map<string, MutableBatch[]>();
  const emailPushers: DeliveryPusher[] = [];
  for (const pusher of pushers) {
    if (!pusher.enabled) continue;
    if (pusher.kind === 'email') {
      emailPushers.push(pusher);
      continue;
    }
    const url = pusher.data.url;
    // set_pusher refuses an HTTP pusher without a URL; one stored otherwise has nowhere to go.
    if (typeof url !== 'string' || url === '') continue;
    const format = typeof pusher.data.format === 'string' ? pusher.data.format : undefined;
    const address = JSON.stringify([pusher.user_id, url, format ?? null]);
    const sameAddress = byAddress.get(address) ?? [];
    byAddress.set(address, sameAddress);
    let batch = sameAddress.find((open) => !open.pushers.some((p) => p.pushkey === pusher.pushkey));
    if (batch === undefined) {
      batch = { userId: pusher.user_id, url, ...(format === undefined ? {} : { format }), pushers: [] };
      sameAddress.push(batch);
      batches.push(batch);
    }
    batch.pushers.push(pusher);
  }
  return { batches, emailPushers };
}

interface MutableBatch extends DeviceBatch {
  readonly pushers: DeliveryPusher[];
}
