import type { RegisteredUser, SynapseServer } from '../../test/integration/support/synapse-server.js';

/** A member of the bench room: a registered user with the pushkey of its one device. */
export interface RoomMember extends RegisteredUser {
  readonly pushkey: string;
}

export const BENCH_APP_ID = 'org.example.bench';

/** Runs `each` over `items`, at most `concurrency` at a time, and returns the results in order. */
export async function inParallel<T, R>(
  items: readonly T[],
  concurrency: number,
  each: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < items.length; i = next++) results[i] = await each(items[i] as T, i);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, lane));
  return results;
}

/**
 * `count` users registered through the shared-secret admin API (the
 * fastest way in: one request pair per user, and `bcrypt_rounds` kept low
 * in the bench's config, since hashing their passwords is setup, not what
 * is measured).
 */
export async function registerMembers(synapse: SynapseServer, count: number): Promise<RoomMember[]> {
  const localparts = Array.from({ length: count }, (_, i) => `member${String(i).padStart(4, '0')}`);
  return inParallel(localparts, 8, async (localpart) => ({
    ...(await synapse.register(localpart)),
    pushkey: `${localpart}-phone`,
  }));
}

/** A public room of `owner` that every member joined; its ID. */
export async function fillRoom(
  synapse: SynapseServer,
  owner: RegisteredUser,
  members: readonly RoomMember[],
): Promise<string> {
  const { room_id: roomId } = (await synapse.request(owner.token, 'POST', '/_matrix/client/v3/createRoom', {
    preset: 'public_chat',
    name: 'Bench',
  })) as { room_id: string };
  // Joins to one room take its lock one after the other in Synapse: more lanes only queue there.
  await inParallel(members, 4, async (member) =>
    synapse.request(member.token, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}`, {}),
  );
  return roomId;
}

/** Each member's HTTP pusher registered with Synapse (`url`), or removed from it (`undefined`). */
export async function setSynapsePushers(
  synapse: SynapseServer,
  members: readonly RoomMember[],
  url: string | undefined,
): Promise<void> {
  await inParallel(members, 8, async (member) =>
    synapse.request(
      member.token,
      'POST',
      '/_matrix/client/v3/pushers/set',
      url === undefined
        ? { kind: null, app_id: BENCH_APP_ID, pushkey: member.pushkey }
        : {
            kind: 'http',
            app_id: BENCH_APP_ID,
            pushkey: member.pushkey,
            app_display_name: 'Bench',
            device_display_name: member.pushkey,
            lang: 'en',
            data: { url },
          },
    ),
  );
}
