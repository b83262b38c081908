import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pushkeyTag } from '../../src/delivery/pushkey-tag.js';
import { LocalPushGateway, NOTIFY_PATH } from '../../src/local-push-gateway/local-push-gateway.js';
import { LOCAL_GATEWAY_MAX_BODY_BYTES } from '../../src/local-push-gateway/local-gateway-settings.js';

const printed: string[] = [];
let gateway: LocalPushGateway;
let origin: string;

beforeAll(async () => {
  gateway = new LocalPushGateway(
    { host: '127.0.0.1', port: 0, reject: new Set(['listed-key']), maxBodyBytes: LOCAL_GATEWAY_MAX_BODY_BYTES },
    (line) => printed.push(line),
  );
  origin = `http://127.0.0.1:${await gateway.listen()}`;
});
afterAll(async () => {
  await gateway.close();
});

async function post(body: string, path = NOTIFY_PATH) {
  const response = await fetch(`${origin}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  return { status: response.status, body: await response.json() };
}

describe('the local push gateway over HTTP', () => {
  it('answers a notify request with the rejected pushkeys and prints one line per device', async () => {
    printed.length = 0;
    const answer = await post(
      JSON.stringify({
        notification: {
          event_id: '$one',
          room_id: '!room:hs',
          counts: { unread: 1 },
          prio: 'high',
          devices: [
            { app_id: 'org.example', pushkey: 'good-key' },
            { app_id: 'org.example', pushkey: 'listed-key' },
            { app_id: 'org.example', pushkey: 'reject-me' },
          ],
        },
      }),
    );
    expect(answer).toEqual({ status: 200, body: { rejected: ['listed-key', 'reject-me'] } });
    expect(printed.map((line) => line.replace(/^\S+ /, ''))).toEqual([
      `notified event=$one room=!room:hs unread=1 prio=high app=org.example pushkey=${pushkeyTag('good-key')}`,
      `rejected event=$one room=!room:hs unread=1 prio=high app=org.example pushkey=${pushkeyTag('listed-key')}`,
      `rejected event=$one room=!room:hs unread=1 prio=high app=org.example pushkey=${pushkeyTag('reject-me')}`,
    ]);

    const recent = (await (await fetch(`${origin}/recent`)).json()) as { notifications: unknown[] };
    expect(recent.notifications.at(-1)).toEqual({
      received_at: expect.any(String) as unknown,
      event_id: '$one',
      room_id: '!room:hs',
      devices: [
        { app_id: 'org.example', pushkey_tag: pushkeyTag('good-key'), rejected: false },
        { app_id: 'org.example', pushkey_tag: pushkeyTag('listed-key'), rejected: true },
        { app_id: 'org.example', pushkey_tag: pushkeyTag('reject-me'), rejected: true },
      ],
    });
  });

  it('answers {"rejected": []} when nothing is rejected (the field is required)', async () => {
    const answer = await post(JSON.stringify({ notification: { devices: [{ app_id: 'a', pushkey: 'k' }] } }));
    expect(answer).toEqual({ status: 200, body: { rejected: [] } });
  });

  it.each([
    ['not JSON', '{', 'M_NOT_JSON'],
    ['no devices', '{"notification":{"devices":[]}}', 'M_BAD_JSON'],
    ['a device without pushkey', '{"notification":{"devices":[{"app_id":"a"}]}}', 'M_BAD_JSON'],
  ])('answers 400 to %s', async (_name, body, errcode) => {
    const answer = await post(body);
    expect(answer).toMatchObject({ status: 400, body: { errcode } });
  });

  it('answers 404 M_UNRECOGNIZED to an unknown path, as the spec says', async () => {
    expect(await post('{}', '/_matrix/push/v2/notify')).toEqual({
      status: 404,
      body: { errcode: 'M_UNRECOGNIZED', error: 'Unrecognized request' },
    });
  });

  it.each(['GET', 'PUT', 'DELETE'])(
    'answers %s on the notify path 405 M_UNRECOGNIZED, as the spec says',
    async (method) => {
      const response = await fetch(`${origin}${NOTIFY_PATH}`, { method });
      expect({ status: response.status, allow: response.headers.get('allow'), body: await response.json() }).toEqual({
        status: 405,
        allow: 'POST',
        body: { errcode: 'M_UNRECOGNIZED', error: 'Unrecognized request' },
      });
    },
  );

  it('answers 405 to a POST on its read-only endpoints', async () => {
    expect(await post('{}', '/recent')).toMatchObject({ status: 405, body: { errcode: 'M_UNRECOGNIZED' } });
  });

  it('answers 413 M_TOO_LARGE to a body over 512 KiB, announced or not', async () => {
    const huge = 'x'.repeat(LOCAL_GATEWAY_MAX_BODY_BYTES + 1);
    expect(await post(huge)).toMatchObject({ status: 413, body: { errcode: 'M_TOO_LARGE' } });
    // Chunked: no Content-Length, so the size is found while reading.
    const chunked = await new Promise<number | undefined>((resolve, reject) => {
      const request = httpRequest(`${origin}${NOTIFY_PATH}`, { method: 'POST' }, (response) => {
        response.resume();
        resolve(response.statusCode);
      });
      request.on('error', reject);
      request.write(huge.slice(0, 300_000));
      request.end(huge.slice(300_000));
    });
    expect(chunked).toBe(413);
  });

  it('is healthy', async () => {
    const response = await fetch(`${origin}/health`);
    expect({ status: response.status, body: await response.json() }).toEqual({ status: 200, body: { status: 'ok' } });
  });
});
