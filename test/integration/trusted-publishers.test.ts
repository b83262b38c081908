import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTRACT_KINDS } from '../support/expect-result.js';
import { startHarness, type Harness } from './support/worker-harness.js';

/**
 * With `amqp.trustedPublishers` set, only requests whose AMQP `userId`
 * names a listed user are served. RabbitMQ refuses a `userId` that is not
 * the publishing connection's user, so the property cannot be forged; a
 * request from a second, untrusted broker user is in the fault suite,
 * which may create users.
 */
let h: Harness;
const user = '@trust:example.org';

beforeAll(async () => {
  h = await startHarness({ trustedPublishers: ['guest'] });
});
afterAll(async () => {
  await h.close();
});

const FORBIDDEN = {
  ok: false,
  error: { kind: 'Forbidden', ...CONTRACT_KINDS.Forbidden, error: 'The publisher of this request is not trusted.' },
};

describe('trusted publishers', () => {
  it('serves a request whose userId is a trusted publisher', async () => {
    const reply = await h.caller.call(h.names.queue, { op: 'get_pushrules', user_id: user }, { userId: 'guest' });
    expect(reply.ok).toBe(true);
  });

  it('refuses a request without userId with Forbidden and changes nothing', async () => {
    const before = await h.db.collection('account_data').findOne({ _id: user as never });
    const reply = await h.caller.call(h.names.queue, {
      op: 'set_pushrule_enabled',
      user_id: user,
      scope: 'global',
      kind: 'override',
      rule_id: '.m.rule.master',
      enabled: true,
    });
    expect(reply).toEqual(FORBIDDEN);
    expect(await h.db.collection('account_data').findOne({ _id: user as never })).toEqual(before);
  });
});
