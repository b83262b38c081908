import { afterAll, beforeAll } from 'vitest';
import { aPusherSetAction } from '../../support/builders.js';
import type { ContractReply } from './rpc-caller.js';
import { startHarness, type Harness } from './worker-harness.js';

/**
 * Pushers follow devices and accounts (issue 15), end to end on RabbitMQ
 * and the MongoDB wire protocol: the device a pusher was created by, its
 * enabled flag, and the homeserver ops a homeserver calls on logout, device
 * deletion, password change and deactivation. The worker trusts the broker
 * user `guest`, as a production pool trusts its homeserver and gateway.
 */
export const PUBLISHER = 'guest';
export let h: Harness;
let n = 0;
export const aUser = () => `@dev${(n += 1)}x${Date.now()}:example.org`;

/** Starts the harness before the file's tests and stops it after them: call once at the top of a test file. */
export function useDevicePushersWorld(): void {
  beforeAll(async () => {
    h = await startHarness({ trustedPublishers: [PUBLISHER] });
  });
  afterAll(async () => {
    await h.close();
  });
}

/** A request from the trusted publisher, with a messageId when given. */
export async function send(
  op: string,
  user: string,
  fields: Record<string, unknown> = {},
  messageId?: string,
): Promise<ContractReply> {
  return h.caller.call(
    h.names.queue,
    { op, user_id: user, ...fields },
    { userId: PUBLISHER, ...(messageId === undefined ? {} : { messageId }) },
  );
}

export const action = (pushkey: string, overrides: Record<string, unknown> = {}) => ({
  ...aPusherSetAction({ pushkey }),
  ...overrides,
});

export async function pushers(user: string): Promise<Record<string, unknown>[]> {
  const reply = await send('get_pushers', user);
  return (reply.body as { pushers: Record<string, unknown>[] }).pushers;
}
export const pushkeys = async (user: string) => (await pushers(user)).map((p) => p['pushkey']).sort();
