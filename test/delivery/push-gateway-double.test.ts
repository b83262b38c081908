import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fetchErrorCode, notify, notifyBody, rawNotify } from '../support/gateway-double-requests.js';
import { PushGatewayDouble } from '../support/push-gateway-double.js';

// Going down and up, and serving HTTPS, are in
// push-gateway-double-connections.test.ts.

describe('push gateway double over HTTP', () => {
  let gateway: PushGatewayDouble;

  beforeAll(async () => {
    gateway = await PushGatewayDouble.start();
  });
  afterEach(() => {
    gateway.restore();
    gateway.clearRequests();
  });
  afterAll(async () => {
    await gateway.close();
  });

  it('answers 200 {"rejected": []} on 127.0.0.1 and records the request', async () => {
    expect(gateway.notifyUrl).toBe(`http://127.0.0.1:${gateway.port}/_matrix/push/v1/notify`);
    const before = Date.now();
    const response = await notify(gateway.notifyUrl, notifyBody(['key-1', 'key-2']));
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ rejected: [] });
    const [recorded] = gateway.requests;
    expect(recorded).toMatchObject({
      method: 'POST',
      path: '/_matrix/push/v1/notify',
      body: notifyBody(['key-1', 'key-2']),
      pushkeys: ['key-1', 'key-2'],
      answer: 200,
    });
    expect(recorded?.headers['content-type']).toBe('application/json');
    expect(recorded?.at).toBeGreaterThanOrEqual(before);
    expect(recorded?.at).toBeLessThanOrEqual(Date.now());
  });

  it('counts the TCP connections it accepted', async () => {
    const before = gateway.connections;
    // node:http without an agent opens a connection per request.
    await rawNotify(gateway.notifyUrl);
    await rawNotify(gateway.notifyUrl);
    expect(gateway.connections - before).toBe(2);
  });

  it('rejects the pushkeys it is told to, only where a request names them', async () => {
    gateway.reject('key-2', 'key-9');
    expect(await (await notify(gateway.notifyUrl, notifyBody(['key-1', 'key-2']))).json()).toEqual({
      rejected: ['key-2'],
    });
    expect(await (await notify(gateway.notifyUrl, notifyBody(['key-1']))).json()).toEqual({ rejected: [] });
  });

  it.each([
    [[], 'The body is not a JSON object'],
    [{}, 'notification is missing or not an object'],
    [{ notification: { devices: [] } }, 'notification.devices is empty'],
    [{ notification: { event_id: '$e' } }, 'notification.devices is missing or not a list'],
    [{ notification: { devices: [{ pushkey: 'k' }] } }, 'notification.devices[0].app_id is missing'],
    [{ notification: { devices: [{ app_id: 'a', pushkey: '' }] } }, 'notification.devices[0].pushkey is missing'],
    [
      {
        notification: {
          devices: [
            { app_id: 'a', pushkey: 'k' },
            { app_id: 'a', pushkey: 'j', pushkey_ts: 1.5 },
          ],
        },
      },
      'notification.devices[1].pushkey_ts is not a non-negative integer',
    ],
    [
      { notification: { devices: [{ app_id: 'a', pushkey: 'k', data: { url: 'https://gw/notify' } }] } },
      'notification.devices[0].data has a url',
    ],
    [{ notification: { devices: [{ app_id: 'a', pushkey: 'k', tweaks: [] }] } }, 'devices[0].tweaks is not an object'],
    [
      { notification: { room_id: null, devices: [{ app_id: 'a', pushkey: 'k' }] } },
      'notification.room_id is not a string',
    ],
    [{ notification: { prio: 'urgent', devices: [{ app_id: 'a', pushkey: 'k' }] } }, 'notification.prio is neither'],
    [
      { notification: { counts: { unread: -1 }, devices: [{ app_id: 'a', pushkey: 'k' }] } },
      'notification.counts.unread is not a non-negative integer',
    ],
    [
      { notification: { user_is_target: 'yes', devices: [{ app_id: 'a', pushkey: 'k' }] } },
      'notification.user_is_target is not a boolean',
    ],
    [{ notification: { content: 'hi', devices: [{ app_id: 'a', pushkey: 'k' }] } }, 'notification.content is not'],
  ])('answers 400 M_BAD_JSON to %j: %s', async (body, message) => {
    const response = await notify(gateway.notifyUrl, body);
    expect(response.status).toBe(400);
    const answer = (await response.json()) as { errcode: string; error: string };
    expect(answer.errcode).toBe('M_BAD_JSON');
    expect(answer.error).toContain(message);
    expect(gateway.requests[0]).toMatchObject({ answer: 400, body, pushkeys: [] });
  });

  it('answers the spec errors to what is not a notify request: not JSON, unknown path, wrong method, too large', async () => {
    const notJson = await notify(gateway.notifyUrl, '{"notification":');
    expect([notJson.status, await notJson.json()]).toEqual([400, expect.objectContaining({ errcode: 'M_NOT_JSON' })]);
    const unknownPath = await notify(`${gateway.origin}/_matrix/push/v2/notify`);
    expect([unknownPath.status, await unknownPath.json()]).toEqual([
      404,
      expect.objectContaining({ errcode: 'M_UNRECOGNIZED' }),
    ]);
    const wrongMethod = await fetch(gateway.notifyUrl);
    expect([wrongMethod.status, await wrongMethod.json()]).toEqual([
      405,
      expect.objectContaining({ errcode: 'M_UNRECOGNIZED' }),
    ]);
    const tooLarge = await notify(gateway.notifyUrl, 'x'.repeat(512 * 1024 + 1));
    expect(tooLarge.status).toBe(413);
    await tooLarge.body?.cancel();
    expect(gateway.requests.map(({ answer }) => answer)).toEqual([400, 404, 405, 413]);
  });

  it('answers slowly when told to', async () => {
    gateway.behave({ kind: 'answer', delayMs: 150 });
    const started = performance.now();
    const response = await notify(gateway.notifyUrl);
    expect(response.status).toBe(200);
    await response.body?.cancel();
    // Timers may fire a millisecond early by the clock measured here.
    expect(performance.now() - started).toBeGreaterThanOrEqual(145);
  });

  it('fails with any status, for everything or for one pushkey, and for a number of times', async () => {
    gateway.behave({ kind: 'status', status: 500 }, { pushkey: 'bad-key' });
    gateway.behave({ kind: 'status', status: 502 }, { times: 2 });
    const statuses = [];
    for (const pushkeys of [['key-1'], ['key-1', 'bad-key'], ['key-1'], ['key-1'], ['bad-key']]) {
      const response = await notify(gateway.notifyUrl, notifyBody(pushkeys));
      statuses.push(response.status);
      await response.body?.cancel();
    }
    expect(statuses).toEqual([502, 500, 502, 200, 500]);
  });

  it('sends Retry-After as delay-seconds or as an HTTP-date, with a Matrix error body', async () => {
    gateway.behave({ kind: 'status', status: 429, retryAfter: 120 }, { times: 1 });
    const seconds = await notify(gateway.notifyUrl);
    expect([seconds.status, seconds.headers.get('retry-after')]).toEqual([429, '120']);
    expect(await seconds.json()).toEqual({ errcode: 'M_UNKNOWN', error: expect.stringContaining('429') as unknown });

    const when = new Date('2030-01-02T03:04:05Z');
    gateway.behave({ kind: 'status', status: 503, retryAfter: when }, { times: 1 });
    const date = await notify(gateway.notifyUrl);
    expect([date.status, date.headers.get('retry-after')]).toEqual([503, 'Wed, 02 Jan 2030 03:04:05 GMT']);
    await date.body?.cancel();
  });

  it('sends a body of its choice, e.g. a 200 that is not JSON', async () => {
    gateway.behave({ kind: 'status', status: 200, body: 'OK, sure' });
    const response = await notify(gateway.notifyUrl);
    expect([response.status, await response.text()]).toEqual([200, 'OK, sure']);
  });

  it('redirects, for a client that must not follow', async () => {
    gateway.behave({ kind: 'redirect', location: 'http://127.0.0.1:1/elsewhere', status: 307 });
    const response = await notify(gateway.notifyUrl, undefined, { redirect: 'manual' });
    expect([response.status, response.headers.get('location')]).toEqual([307, 'http://127.0.0.1:1/elsewhere']);
    gateway.behave({ kind: 'redirect', location: '/somewhere' });
    const found = await notify(gateway.notifyUrl, undefined, { redirect: 'manual' });
    expect([found.status, found.headers.get('location')]).toEqual([302, '/somewhere']);
    expect(gateway.requests.map(({ answer }) => answer)).toEqual([307, 302]);
  });

  it('hangs: only the client timeout ends the request', async () => {
    gateway.behave({ kind: 'hang' }, { pushkey: 'key-1' });
    const code = await fetchErrorCode(notify(gateway.notifyUrl, undefined, { signal: AbortSignal.timeout(200) }));
    expect(code).toBe('TimeoutError');
    expect(gateway.requests.map(({ answer }) => answer)).toEqual(['hang']);
  });

  it('holds: answers nothing until told, then 200 to each held request; recorded as received', async () => {
    gateway.behave({ kind: 'hold' }, { pushkey: 'key-1', times: 1 });
    let answered = false;
    const held = rawNotify(gateway.notifyUrl).finally(() => {
      answered = true;
    });
    await gateway.waitForRequests(1);
    expect(await rawNotify(gateway.notifyUrl)).toEqual({ status: 200, body: '{"rejected":[]}' });
    expect(answered).toBe(false);
    expect(gateway.answerHeld()).toBe(1);
    expect(await held).toEqual({ status: 200, body: '{"rejected":[]}' });
    expect(gateway.answerHeld()).toBe(0);
    expect(gateway.requests.map(({ answer }) => answer)).toEqual([200, 200]);
    expect(gateway.deviceLog.get('key-1')).toHaveLength(2);
  });

  it('resets the connection: the client sees ECONNRESET', async () => {
    gateway.behave({ kind: 'reset' });
    expect(await rawNotify(gateway.notifyUrl)).toEqual({ errorCode: 'ECONNRESET' });
    expect(await fetchErrorCode(notify(gateway.notifyUrl))).toBe('ECONNRESET');
    expect(gateway.requests.map(({ answer }) => answer)).toEqual(['reset', 'reset']);
  });

  it('waits for requests, and says how many came when they do not', async () => {
    const waiting = gateway.waitForRequests(2, 2_000);
    await (await notify(gateway.notifyUrl)).body?.cancel();
    await (await notify(gateway.notifyUrl)).body?.cancel();
    expect((await waiting).length).toBe(2);
    await expect(gateway.waitForRequests(3, 50)).rejects.toThrow('got 2 of 3 requests in 50 ms');
  });
});

describe('push gateway double with the light recording (the bench)', () => {
  let gateway: PushGatewayDouble | undefined;

  afterEach(async () => {
    await gateway?.close();
  });

  it('keeps no request whole, only counts and what each device got in order', async () => {
    gateway = await PushGatewayDouble.start({ recording: 'light' });
    const body = (eventId: string, pushkeys: readonly string[]) => {
      const full = notifyBody(pushkeys) as { notification: Record<string, unknown> };
      return { notification: { ...full.notification, event_id: eventId } };
    };
    await (await notify(gateway.notifyUrl, body('$1', ['a', 'b']))).body?.cancel();
    gateway.behave({ kind: 'status', status: 503 }, { times: 1 });
    await (await notify(gateway.notifyUrl, body('$2', ['a']))).body?.cancel();
    await (await notify(gateway.notifyUrl, body('$3', ['a']))).body?.cancel();
    await (await notify(gateway.notifyUrl, 'not json')).body?.cancel();

    expect(gateway.requests).toEqual([]);
    await expect(gateway.waitForRequests(4, 50)).resolves.toEqual([]);
    const stats = gateway.stats;
    expect(stats).toMatchObject({ requests: 4, answers: { 200: 2, 503: 1, 400: 1 }, devicesDelivered: 3 });
    expect(stats.lastAt).toBeGreaterThanOrEqual(stats.firstAt ?? Infinity);
    expect(gateway.deviceLog.get('a')?.map((d) => d.eventId)).toEqual(['$1', '$3']);
    expect(gateway.deviceLog.get('b')?.map((d) => d.eventId)).toEqual(['$1']);

    gateway.clearRequests();
    expect(gateway.stats).toEqual({
      requests: 0,
      answers: {},
      devicesDelivered: 0,
      firstAt: undefined,
      lastAt: undefined,
    });
    expect(gateway.deviceLog.size).toBe(0);
  });

  it('counts in the full recording too', async () => {
    gateway = await PushGatewayDouble.start();
    await (await notify(gateway.notifyUrl)).body?.cancel();
    expect(gateway.requests).toHaveLength(1);
    expect(gateway.stats).toMatchObject({ requests: 1, answers: { 200: 1 }, devicesDelivered: 1 });
    expect(gateway.deviceLog.get('key-1')?.map((d) => d.eventId)).toEqual(['$event']);
  });
});
