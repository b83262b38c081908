import type { RawPusherSetAction } from '../../src/pushers/decide-pusher-set.js';
import type { WirePusher } from '../../src/pushers/pusher.js';
import type { Command } from '../../src/service/command.js';
import { PushService } from '../../src/service/push-service.js';
import { InMemoryPushStore } from '../../src/store/in-memory-push-store.js';
import { ALICE } from './builders.js';
import { OPTIONS } from './push-service-world.js';

/**
 * The service the tests of pushers that follow devices (issue 15) run
 * against: test/service/push-service-devices.test.ts and
 * push-service-user-data.test.ts.
 */
export const BOB = '@bob:example.org';

export const action = (pushkey: string, overrides: Partial<RawPusherSetAction> = {}): RawPusherSetAction => ({
  kind: 'http',
  app_id: 'org.example.app',
  pushkey,
  app_display_name: 'App',
  device_display_name: 'Phone',
  lang: 'en',
  data: { url: 'https://push.example.org/_matrix/push/v1/notify' },
  ...overrides,
});
export const emailAction = (address: string): RawPusherSetAction => ({
  kind: 'email',
  app_id: 'm.email',
  pushkey: address,
  app_display_name: 'E-mail',
  device_display_name: address,
  lang: 'en',
  data: {},
});
export const setPusher = (
  pushkey: string,
  deviceId?: string,
  overrides: Partial<RawPusherSetAction> = {},
  userId = ALICE,
): Command =>
  deviceId === undefined
    ? { op: 'set_pusher', userId, action: action(pushkey, overrides) }
    : { op: 'set_pusher', userId, action: action(pushkey, overrides), deviceId };

/** A service on an empty store, and ways to run commands on it and read a user's pushers. */
export function setup() {
  const store = new InMemoryPushStore();
  const service = new PushService(store, OPTIONS);
  const run = async (command: Command, messageId?: string) =>
    service.handle(command, messageId === undefined ? {} : { messageId });
  const pushers = async (userId = ALICE) => {
    const outcome = await run({ op: 'get_pushers', userId });
    if (!outcome.reply.ok) throw new Error('get_pushers failed');
    return (outcome.reply.body as { pushers: WirePusher[] }).pushers;
  };
  const pushkeys = async (userId = ALICE) => (await pushers(userId)).map((p) => p.pushkey).sort();
  return { store, service, run, pushers, pushkeys };
}
