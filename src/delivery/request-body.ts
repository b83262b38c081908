import type { DeliveryPusher } from './device-batches.js';
import type { GatewayBodyEncoder } from './gateway-payload.js';
import type { NotifyRecipient, Pushed, PushPrio, Tweaks } from './notification-plan.js';
import { plannedPushers } from './queue-names.js';

/** A body not encoded yet: the store's `PendingDelivery` takes it as this (it knows nothing of delivery). */
export interface EncodableBody {
  encodeBody(): string;
}

/**
 * A request's body: the text a store holds (a request taken over, or
 * narrowed after its pushers changed), or, for a request planned by this
 * worker, what the text is built from (`PlannedBody`).
 */
export type RequestBody = string | EncodableBody;

/**
 * What a gateway request's body is rebuilt from while the request waits:
 * the encoder every recipient of one `notify` shares (gateway-payload.ts
 * `gatewayBodyEncoder`: the notification's shared fields encoded once, one
 * for all of them), and the fields of this recipient and its devices. A
 * device's backlog (up to `maxPending` of them, for every device of a
 * failing gateway) thus holds the event once per `notify`, not once per
 * device; the body is encoded when the request is sent or stored
 * (`bodyText`), the same bytes `gatewayRequestBody` gives. A class for its
 * method: one on the prototype, not a closure per request.
 */
export class PlannedBody implements EncodableBody {
  constructor(
    /** Shared by every request of the `notify`: never copied per request. */
    readonly encode: GatewayBodyEncoder,
    readonly counts: NotifyRecipient['counts'] | undefined,
    readonly userIsTarget: boolean | undefined,
    readonly prio: PushPrio,
    readonly tweaks: Tweaks,
    /** The pushers' `data.format`; undefined for the full format. */
    readonly format: string | undefined,
    /** The devices, in the order sent: the pushers the request names. */
    readonly pushers: readonly DeliveryPusher[],
  ) {}

  encodeBody(): string {
    const { counts, userIsTarget, prio, tweaks, format, pushers } = this;
    return this.encode(
      {
        ...(counts === undefined ? {} : { counts }),
        ...(userIsTarget === undefined ? {} : { user_is_target: userIsTarget }),
      },
      { prio, tweaks },
      format === undefined ? { pushers } : { format, pushers },
    );
  }
}

const NO_TWEAKS: Tweaks = Object.freeze({});

/** The body of one request of one recipient, as planned (`planRecipient`). */
export function plannedBody(
  encode: GatewayBodyEncoder,
  recipient: Pick<NotifyRecipient, 'counts' | 'user_is_target'>,
  plan: Pick<Pushed, 'prio' | 'tweaks'>,
  batch: { readonly format?: string | undefined; readonly pushers: readonly DeliveryPusher[] },
): PlannedBody {
  // Only what the body needs of the recipient: the rest of it (its actions) is not kept alive with the request.
  // Per waiting request, every byte counts 2,000 devices × maxPending times in an outage: the pushers are copied
  // to an array of their exact length (the batch's grew by pushes, with room for 16 more), and no tweaks are
  // one shared object.
  return new PlannedBody(
    encode,
    recipient.counts,
    recipient.user_is_target,
    plan.prio,
    Object.keys(plan.tweaks).length === 0 ? NO_TWEAKS : plan.tweaks,
    batch.format,
    plannedPushers(batch.pushers),
  );
}

/** The body as it is sent: JSON text. */
export function bodyText(body: RequestBody): string {
  return typeof body === 'string' ? body : body.encodeBody();
}

/** The body with only these of its devices (the others' pushers are gone); a text one is parsed and encoded again. */
export function bodyFor(
  body: RequestBody,
  keep: (device: { readonly appId: string; readonly pushkey: string }) => boolean,
): RequestBody {
  if (body instanceof PlannedBody) {
    const pushers = body.pushers.filter((p) => keep({ appId: p.app_id, pushkey: p.pushkey }));
    const { encode, counts, userIsTarget, prio, tweaks, format } = body;
    return new PlannedBody(encode, counts, userIsTarget, prio, tweaks, format, pushers);
  }
  const parsed = JSON.parse(bodyText(body)) as { notification: { devices: { app_id: string; pushkey: string }[] } };
  parsed.notification.devices = parsed.notification.devices.filter((device) =>
    keep({ appId: device.app_id, pushkey: device.pushkey }),
  );
  return JSON.stringify(parsed);
}
