import { execFile } from 'node:child_process';
import { pbkdf2 } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseAddressAllowlist } from '../../src/delivery/address-allowlist.js';
import { gatewayRequestBody, type GatewayRequestBody } from '../../src/delivery/gateway-payload.js';
import { classifyExchange, type GatewayExchange } from '../../src/delivery/response-outcome.js';
import { GatewayClient, GatewayClientClosedError } from '../../src/delivery-http/gateway-client.js';
import type { GatewayClientOptions } from '../../src/delivery-http/gateway-client-options.js';
import { ALICE } from '../support/builders.js';
import { DnsDouble } from '../support/dns-double.js';
import { aDeliveryPusher, aNotification, aPushedPlan, aRecipient } from '../support/notify-builders.js';
import { PushGatewayDouble, type RecordedRequest } from '../support/push-gateway-double.js';
import { makeThrowawayCa, type ThrowawayCa, throwawayCaUnavailable } from '../support/throwaway-ca.js';

const BOB = '@bob:example.org';

/** The double listens on 127.0.0.1, which the address policy refuses unless the operator opens it. */
const LOOPBACK = parseAddressAllowlist('127.0.0.1/32');

/** A notify body for one device of Alice's per pushkey, as the delivery planning builds it. */
function notifyBody(url: string, ...pushkeys: string[]): GatewayRequestBody {
  const pushers = (pushkeys.length === 0 ? ['key-1'] : pushkeys).map((pushkey) =>
    aDeliveryPusher({ pushkey, data: { url } }),
  );
  return gatewayRequestBody(aNotification(), aRecipient(), aPushedPlan(), { pushers });
}

// Everything a test starts, stopped after it: the gateways first (their
// sockets dropped, so nothing in flight keeps a client's close waiting),
// then the clients, then anything else.
const doubles: PushGatewayDouble[] = [];
const clients: GatewayClient[] = [];
const servers: Server[] = [];
const dnsDoubles: DnsDouble[] = [];

afterEach(async () => {
  await Promise.all(doubles.splice(0).map(async (double) => double.close()));
  await Promise.all(dnsDoubles.splice(0).map(async (double) => double.close()));
  await Promise.all(clients.splice(0).map(async (client) => client.close()));
  await Promise.all(
    servers.splice(0).map(
      async (server) =>
        new Promise<void>((resolve) => {
          server.close(() => {
            resolve();
          });
          server.closeAllConnections();
        }),
    ),
  );
});

async function aGateway(tls?: { readonly key: string; readonly cert: string }): Promise<PushGatewayDouble> {
  const double = await PushGatewayDouble.start(tls === undefined ? {} : { tls });
  doubles.push(double);
  return double;
}

function aClient(options: GatewayClientOptions = {}): GatewayClient {
  const client = new GatewayClient({ allowlist: LOOPBACK, ...options });
  clients.push(client);
  return client;
}

/** A DNS server answering each of `names` with 127.0.0.1, where the gateway doubles listen. */
async function aDnsServer(...names: string[]): Promise<DnsDouble> {
  const dns = await DnsDouble.start();
  dnsDoubles.push(dns);
  for (const name of names) dns.set(name, { a: ['127.0.0.1'] });
  return dns;
}

/** The gateway's notify URL under another name. */
function byName(gateway: PushGatewayDouble, name: string): string {
  return gateway.notifyUrl.replace('127.0.0.1', name);
}

/**
 * The most requests a gateway was busy with at once, from the record: each
 * is taken as busy from its arrival until the gateway's delayed answer (the
 * slack absorbs timer and clock granularity; a request sent only after an
 * answer arrives at least `delayMs` after the one answered).
 */
function mostAtOnce(requests: readonly RecordedRequest[], delayMs: number): number {
  const slackMs = 40;
  const arrivals = requests.map((request) => request.at);
  return Math.max(
    ...arrivals.map((at) => arrivals.filter((other) => other <= at && at < other + delayMs - slackMs).length),
  );
}

/** A JSON body of exactly `bytes` bytes (ASCII), rejecting key-1. */
function bodyOfSize(bytes: number): string {
  const shell = '{"rejected":["key-1"],"padding":""}';
  return shell.replace('""', `"${'x'.repeat(bytes - shell.length)}"`);
}

describe('a request to the gateway double', () => {
  it('POSTs the body as JSON to the pusher URL, exactly as built, and reads the answer', async () => {
    const gateway = await aGateway();
    const body = notifyBody(gateway.notifyUrl, 'key-1', 'key-2');
    const exchange = await aClient().send(gateway.notifyUrl, body);
    expect(exchange).toEqual({ kind: 'response', status: 200, body: '{"rejected":[]}' });
    expect(classifyExchange(exchange, Date.now())).toEqual({ kind: 'delivered', status: 200, rejected: [] });
    expect(gateway.requests).toHaveLength(1);
    const [recorded] = gateway.requests;
    expect(recorded).toMatchObject({
      method: 'POST',
      path: '/_matrix/push/v1/notify',
      pushkeys: ['key-1', 'key-2'],
      answer: 200,
    });
    expect(recorded?.rawBody).toBe(JSON.stringify(body));
    expect(recorded?.body).toEqual(body);
    expect(recorded?.headers['content-type']).toBe('application/json');
  });

  it('keeps the query of the pusher URL', async () => {
    const gateway = await aGateway();
    const url = `${gateway.notifyUrl}?app=1`;
    await aClient().send(url, notifyBody(url));
    expect(gateway.requests[0]?.path).toBe('/_matrix/push/v1/notify?app=1');
  });

  it('brings back the pushkeys the gateway rejects', async () => {
    const gateway = await aGateway();
    gateway.reject('key-2');
    const exchange = await aClient().send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, 'key-1', 'key-2', 'key-3'));
    expect(exchange).toEqual({ kind: 'response', status: 200, body: '{"rejected":["key-2"]}' });
    expect(classifyExchange(exchange, Date.now())).toEqual({ kind: 'delivered', status: 200, rejected: ['key-2'] });
  });

  it.each<[string, number, number | undefined, string | undefined]>([
    ['503 with Retry-After in seconds', 503, 120, '120'],
    ['429 with Retry-After in seconds', 429, 30, '30'],
    ['500 without Retry-After', 500, undefined, undefined],
  ])('%s: status and header as sent', async (_, status, retryAfter, header) => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'status', status, ...(retryAfter === undefined ? {} : { retryAfter }) });
    const exchange = await aClient().send(gateway.notifyUrl, notifyBody(gateway.notifyUrl));
    expect(exchange).toMatchObject({ kind: 'response', status });
    if (header === undefined) expect(exchange).not.toHaveProperty('retryAfter');
    else expect(exchange).toHaveProperty('retryAfter', header);
    expect(classifyExchange(exchange, Date.now())).toMatchObject({
      kind: 'retry',
      status,
      ...(retryAfter === undefined ? {} : { retryAfterMs: retryAfter * 1000 }),
    });
  });

  it('brings back a Retry-After HTTP-date as sent', async () => {
    const gateway = await aGateway();
    const later = new Date(Math.ceil(Date.now() / 1000) * 1000 + 90_000);
    gateway.behave({ kind: 'status', status: 429, retryAfter: later });
    const exchange = await aClient().send(gateway.notifyUrl, notifyBody(gateway.notifyUrl));
    expect(exchange).toMatchObject({ kind: 'response', status: 429, retryAfter: later.toUTCString() });
  });

  it.each([301, 302, 303, 307, 308])('does not follow a %i redirect', async (status) => {
    const gateway = await aGateway();
    const elsewhere = await aGateway();
    gateway.behave({ kind: 'redirect', status, location: elsewhere.notifyUrl });
    const exchange = await aClient().send(gateway.notifyUrl, notifyBody(gateway.notifyUrl));
    expect(exchange).toMatchObject({ kind: 'response', status });
    expect(classifyExchange(exchange, Date.now())).toEqual({ kind: 'failed', cause: 'redirect', status });
    expect(gateway.requests).toHaveLength(1);
    expect(elsewhere.requests).toHaveLength(0);
    expect(elsewhere.connections).toBe(0);
  });

  it('gives up on a gateway that never answers after the headers timeout', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'hang' });
    const started = performance.now();
    const exchange = await aClient({ headersTimeoutMs: 300 }).send(gateway.notifyUrl, notifyBody(gateway.notifyUrl));
    const tookMs = performance.now() - started;
    expect(exchange).toEqual({ kind: 'timeout', phase: 'headers' });
    expect(gateway.requests).toHaveLength(1);
    expect(tookMs).toBeGreaterThanOrEqual(290);
    expect(tookMs).toBeLessThan(3_000);
    expect(classifyExchange(exchange, Date.now())).toEqual({ kind: 'retry', cause: 'timeout' });
  });

  it('says a reset connection is a connection error, and connects anew for the next request', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'reset' }, { times: 1 });
    const client = aClient();
    const exchange = await client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl));
    expect(exchange).toEqual({ kind: 'connection-error', reason: expect.any(String) as unknown });
    expect(classifyExchange(exchange, Date.now())).toEqual({ kind: 'retry', cause: 'connection-error' });
    expect(await client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl))).toMatchObject({ status: 200 });
    expect(gateway.requests.map((request) => request.answer)).toEqual(['reset', 200]);
  });

  it('says a refused connection is a connection error, without throwing', async () => {
    const gateway = await aGateway();
    await gateway.down();
    expect(await aClient().send(gateway.notifyUrl, notifyBody(gateway.notifyUrl))).toEqual({
      kind: 'connection-error',
      reason: 'ECONNREFUSED',
    });
  });

  it.each<[string, number, Partial<GatewayExchange>]>([
    ['exactly 64 KiB is read whole', 64 * 1024, { body: bodyOfSize(64 * 1024) }],
    ['one byte more is dropped whole', 64 * 1024 + 1, { bodyDropped: 'too-large' }],
  ])('a 200 body of %s', async (_, bytes, read) => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'status', status: 200, body: bodyOfSize(bytes) });
    const exchange = await aClient().send(gateway.notifyUrl, notifyBody(gateway.notifyUrl));
    expect(exchange).toEqual({ kind: 'response', status: 200, ...read });
    // Only a body read whole may remove pushers: the dropped one is delivered, nothing rejected.
    const rejected = 'body' in read ? ['key-1'] : [];
    expect(classifyExchange(exchange, Date.now())).toEqual({ kind: 'delivered', status: 200, rejected });
  });

  it.each<[string, number]>([
    ['a short one', 1024],
    ['one far over the cap', 4 * 1024 * 1024],
  ])('discards the body of a 503, %s: status and Retry-After only, nothing kept', async (_, bytes) => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'status', status: 503, retryAfter: 120, body: bodyOfSize(bytes) });
    const client = aClient();
    const exchange = await client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl));
    expect(exchange).toEqual({ kind: 'response', status: 503, retryAfter: '120' });
    expect(classifyExchange(exchange, Date.now())).toMatchObject({ kind: 'retry', retryAfterMs: 120_000 });
  });

  it('reuses the connection after discarding a short error body (read to its end, not cut off)', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'status', status: 500, body: bodyOfSize(1024) }, { times: 1 });
    const client = aClient();
    expect(await client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl))).toEqual({
      kind: 'response',
      status: 500,
    });
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl))).toMatchObject({ status: 200 });
    expect(gateway.connections).toBe(1);
  });

  it('keeps the status of an answer whose body stalls, and drops the body after the body timeout', async () => {
    // A gateway that sends its headers and part of its body, then nothing: the double cannot, node:http can.
    const stalling = createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        response.writeHead(200, { 'Content-Type': 'application/json' });
        response.write('{"rejected":["key-1"');
      });
    });
    servers.push(stalling);
    await new Promise<void>((resolve) => stalling.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(stalling.address() as AddressInfo).port}/_matrix/push/v1/notify`;
    const exchange = await aClient({ bodyTimeoutMs: 200 }).send(url, notifyBody(url));
    expect(exchange).toEqual({ kind: 'response', status: 200, bodyDropped: 'timeout' });
    expect(classifyExchange(exchange, Date.now())).toEqual({ kind: 'delivered', status: 200, rejected: [] });
  });

  it('reuses one keep-alive connection for requests one after another', async () => {
    const gateway = await aGateway();
    const client = aClient();
    for (let request = 0; request < 3; request += 1) {
      expect(await client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl))).toMatchObject({ status: 200 });
      // undici frees a connection one event-loop turn after its response (so that a server closing it
      // anyway is noticed first): a request sent within that turn would open a second one, below the cap.
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(gateway.requests).toHaveLength(3);
    expect(gateway.connections).toBe(1);
  });

  it('sends back-to-back requests on one connection when that is the origin’s cap', async () => {
    const gateway = await aGateway();
    const client = aClient({ maxInFlightPerOrigin: 1 });
    for (let request = 0; request < 5; request += 1) {
      expect(await client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl))).toMatchObject({ status: 200 });
    }
    expect(gateway.connections).toBe(1);
  });
});

describe('requests in flight', () => {
  const DELAY_MS = 150;

  it('holds a gateway origin to its cap: 10 sends, cap 2, never more than 2 at the gateway', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'answer', delayMs: DELAY_MS });
    const client = aClient({ maxInFlightPerOrigin: 2 });
    const exchanges = await Promise.all(
      Array.from({ length: 10 }, async (_, index) =>
        client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, `key-${index}`)),
      ),
    );
    expect(exchanges.every((exchange) => exchange.kind === 'response' && exchange.status === 200)).toBe(true);
    expect(gateway.requests).toHaveLength(10);
    expect(mostAtOnce(gateway.requests, DELAY_MS)).toBe(2);
    expect(gateway.connections).toBeLessThanOrEqual(2);
  });

  it('sends them all at once when the cap allows (the measure above can see more than 2)', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'answer', delayMs: DELAY_MS });
    const client = aClient({ maxInFlightPerOrigin: 10 });
    await Promise.all(
      Array.from({ length: 10 }, async (_, index) =>
        client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, `key-${index}`)),
      ),
    );
    expect(mostAtOnce(gateway.requests, DELAY_MS)).toBe(10);
  });

  it('holds all gateways together to the global cap: 2 at once across two origins', async () => {
    const gateways = [await aGateway(), await aGateway()];
    for (const gateway of gateways) gateway.behave({ kind: 'answer', delayMs: DELAY_MS });
    const client = aClient({ maxInFlight: 2, maxInFlightPerOrigin: 10 });
    await Promise.all(
      Array.from({ length: 10 }, async (_, index) => {
        const { notifyUrl } = gateways[index % 2] as PushGatewayDouble;
        return client.send(notifyUrl, notifyBody(notifyUrl, `key-${index}`));
      }),
    );
    expect(gateways.map((gateway) => gateway.requests.length)).toEqual([5, 5]);
    expect(
      mostAtOnce(
        gateways.flatMap((gateway) => gateway.requests),
        DELAY_MS,
      ),
    ).toBe(2);
  });
});

describe('SSRF: the address connected to', () => {
  it.each([
    ['127.0.0.1, an IP literal', '127.0.0.1', /^127\.0\.0\.0\/8$/],
    ['localhost, a name resolving to loopback', 'localhost', /^(127\.0\.0\.0\/8|::1\/128)$/],
  ])('refuses %s without the allowlist: no connection, no request', async (_, host, rule) => {
    const gateway = await aGateway();
    const url = gateway.notifyUrl.replace('127.0.0.1', host);
    const exchange = await aClient({ allowlist: [] }).send(url, notifyBody(url));
    expect(exchange).toEqual({
      kind: 'address-refused',
      rule: expect.stringMatching(rule) as unknown,
      reason: expect.any(String) as unknown,
    });
    expect(classifyExchange(exchange, Date.now())).toEqual({ kind: 'failed', cause: 'address-refused' });
    expect(gateway.requests).toHaveLength(0);
    expect(gateway.connections).toBe(0);
  });

  it.each([
    ['IPv6 loopback', 'http://[::1]:9/_matrix/push/v1/notify', '::1/128'],
    ['IPv4-mapped loopback', 'http://[::ffff:127.0.0.1]:9/_matrix/push/v1/notify', '127.0.0.0/8'],
    ['cloud metadata', 'http://169.254.169.254/_matrix/push/v1/notify', '169.254.0.0/16'],
    ['a private address', 'https://10.1.2.3/_matrix/push/v1/notify', '10.0.0.0/8'],
  ])('refuses an IP literal of %s before connecting', async (_, url, rule) => {
    // Nothing listens on port 9 of loopback: a connection attempt would end as ECONNREFUSED, not refused here.
    const exchange = await aClient({ allowlist: [] }).send(url, notifyBody(url));
    expect(exchange).toMatchObject({ kind: 'address-refused', rule });
  });

  it('refuses what is not an http(s) URL, sending nothing', async () => {
    const client = aClient();
    for (const url of ['ftp://127.0.0.1/notify', 'not a URL', 'file:///etc/passwd']) {
      expect(await client.send(url, notifyBody('https://push.example.org/'))).toMatchObject({
        kind: 'address-refused',
        rule: 'not an http(s) URL',
      });
    }
  });
});

describe('closing', () => {
  it('refuses sends waiting for a slot, lets the one in flight finish, and closes once however often asked', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'answer', delayMs: 200 });
    const client = aClient({ maxInFlightPerOrigin: 1 });
    const inFlight = client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, 'key-1'));
    const waiting = client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, 'key-2'));
    await gateway.waitForRequests(1);
    const closed = [client.close(), client.close()];
    await expect(waiting).rejects.toBeInstanceOf(GatewayClientClosedError);
    expect(await inFlight).toMatchObject({ kind: 'response', status: 200 });
    await Promise.all(closed);
    await client.close();
    await expect(client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl))).rejects.toBeInstanceOf(
      GatewayClientClosedError,
    );
    expect(gateway.requests.map((request) => request.pushkeys)).toEqual([['key-1']]);
  });

  it.each([
    { name: 'alone', closeFirst: false },
    { name: 'while a close waits for them', closeFirst: true },
  ])('destroy ($name) aborts the requests a silent gateway holds: each a connection error', async ({ closeFirst }) => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'hold' });
    const client = aClient();
    const inFlight = [1, 2].map(async (n) =>
      client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, `key-${String(n)}`)),
    );
    await gateway.waitForRequests(2);
    const closing = closeFirst ? client.close() : undefined;
    await client.destroy();
    expect(await Promise.all(inFlight)).toEqual([1, 2].map(() => ({ kind: 'connection-error', reason: 'AbortError' })));
    await closing;
    await expect(client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl))).rejects.toBeInstanceOf(
      GatewayClientClosedError,
    );
  });

  it('refuses settings that are not whole numbers ≥ 1 at construction', () => {
    expect(() => new GatewayClient({ maxInFlight: 0 })).toThrow(RangeError);
    expect(() => new GatewayClient({ maxInFlightPerOrigin: 1.5 })).toThrow(/maxInFlightPerOrigin/);
    expect(() => new GatewayClient({ headersTimeoutMs: -1 })).toThrow(/headersTimeoutMs/);
    expect(() => new GatewayClient({ maxInFlightPerAddress: 0 })).toThrow(/maxInFlightPerAddress/);
    expect(() => new GatewayClient({ maxInFlightPerUser: 1.5 })).toThrow(/maxInFlightPerUser/);
  });
});

describe('HTTPS with a throwaway CA', () => {
  const unavailable = throwawayCaUnavailable();
  let ca: ThrowawayCa | undefined;

  beforeAll(async () => {
    if (unavailable === undefined) ca = await makeThrowawayCa();
  });
  afterAll(async () => {
    await ca?.remove();
  });

  /** The CA and a double serving HTTPS with it, or the test is skipped saying why. */
  async function httpsGateway(
    skip: (condition: boolean, note: string) => void,
  ): Promise<{ ca: ThrowawayCa; gateway: PushGatewayDouble }> {
    skip(ca === undefined, `skipped: ${unavailable ?? 'no throwaway CA'}`);
    const { serverKey, serverCert } = ca as ThrowawayCa;
    return { ca: ca as ThrowawayCa, gateway: await aGateway({ key: serverKey, cert: serverCert }) };
  }

  it('delivers when the CA is among the extra trusted CAs, over a verified connection', async ({ skip }) => {
    const { ca: trusted, gateway } = await httpsGateway(skip);
    expect(gateway.notifyUrl.startsWith('https://127.0.0.1:')).toBe(true);
    const exchange = await aClient({ extraTrustedCas: [trusted.caCert] }).send(
      gateway.notifyUrl,
      notifyBody(gateway.notifyUrl),
    );
    expect(exchange).toEqual({ kind: 'response', status: 200, body: '{"rejected":[]}' });
    expect(gateway.requests).toHaveLength(1);
  });

  it('verifies the certificate for the name when connecting to the address it resolved to', async ({ skip }) => {
    const { ca: trusted, gateway } = await httpsGateway(skip);
    const url = gateway.notifyUrl.replace('127.0.0.1', 'localhost');
    const exchange = await aClient({ extraTrustedCas: [trusted.caCert] }).send(url, notifyBody(url));
    expect(exchange).toEqual({ kind: 'response', status: 200, body: '{"rejected":[]}' });
    expect(gateway.requests[0]?.headers.host).toBe(new URL(url).host);
  });

  it('refuses a certificate it cannot verify: a connection error, no request', async ({ skip }) => {
    const { gateway } = await httpsGateway(skip);
    expect(await aClient().send(gateway.notifyUrl, notifyBody(gateway.notifyUrl))).toEqual({
      kind: 'connection-error',
      reason: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
    });
    expect(gateway.requests).toHaveLength(0);
  });

  it('trusts the CA through NODE_EXTRA_CA_CERTS, the operators’ way, and only then', async ({ skip }) => {
    const { ca: trusted, gateway } = await httpsGateway(skip);
    // A process of its own: Node reads NODE_EXTRA_CA_CERTS once, at start. The client has no CA option there.
    const script = `
      const [clientModule, allowlistModule, url, body] = process.argv.slice(1);
      const { GatewayClient } = await import(clientModule);
      const { parseAddressAllowlist } = await import(allowlistModule);
      const client = new GatewayClient({ allowlist: parseAddressAllowlist('127.0.0.1/32') });
      console.log(JSON.stringify(await client.send(url, JSON.parse(body))));
      await client.close();`;
    const module = (path: string): string => pathToFileURL(new URL(path, import.meta.url).pathname).href;
    const run = async (environment: NodeJS.ProcessEnv): Promise<unknown> => {
      const { stdout } = await promisify(execFile)(
        process.execPath,
        [
          '--import',
          'tsx',
          '--input-type=module',
          '--eval',
          script,
          module('../../src/delivery-http/gateway-client.ts'),
          module('../../src/delivery/address-allowlist.ts'),
          gateway.notifyUrl,
          JSON.stringify(notifyBody(gateway.notifyUrl)),
        ],
        { env: environment },
      );
      return JSON.parse(stdout) as unknown;
    };
    const { NODE_EXTRA_CA_CERTS: _inherited, ...withoutExtraCa } = process.env;
    expect(await run({ ...withoutExtraCa, NODE_EXTRA_CA_CERTS: trusted.caCertFile })).toEqual({
      kind: 'response',
      status: 200,
      body: '{"rejected":[]}',
    });
    expect(await run(withoutExtraCa)).toEqual({ kind: 'connection-error', reason: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' });
    expect(gateway.requests).toHaveLength(1);
  });
});

describe('names: resolved first, then exactly that address connected to', () => {
  it('sends to the address the name resolved to, with the name as Host', async () => {
    const gateway = await aGateway();
    const dns = await aDnsServer('push.test');
    const url = byName(gateway, 'push.test');
    const exchange = await aClient({ dns: { servers: [dns.server] } }).send(url, notifyBody(url));
    expect(exchange).toEqual({ kind: 'response', status: 200, body: '{"rejected":[]}' });
    expect(gateway.requests[0]?.headers.host).toBe(new URL(url).host);
  });

  it('says a name that does not exist is a connection error, connecting nowhere', async () => {
    const gateway = await aGateway();
    const dns = await aDnsServer();
    const url = byName(gateway, 'missing.test');
    expect(await aClient({ dns: { servers: [dns.server] } }).send(url, notifyBody(url))).toEqual({
      kind: 'connection-error',
      reason: 'ENOTFOUND',
    });
    expect(gateway.connections).toBe(0);
  });

  it('refuses a name resolving to a private address, connecting nowhere', async () => {
    const dns = await aDnsServer();
    dns.set('inside.test', { a: ['8.8.8.8', '10.1.2.3'] });
    const url = 'https://inside.test/_matrix/push/v1/notify';
    expect(await aClient({ allowlist: [], dns: { servers: [dns.server] } }).send(url, notifyBody(url))).toMatchObject({
      kind: 'address-refused',
      rule: '10.0.0.0/8',
    });
  });

  it('connects while every threadpool thread is busy: nothing waits for getaddrinfo', async () => {
    const gateway = await aGateway();
    const dns = await aDnsServer('push.test');
    const url = byName(gateway, 'push.test');
    const client = aClient({ dns: { servers: [dns.server] } });
    let poolDone = false;
    const pool = Promise.all(
      Array.from(
        { length: 4 },
        async () =>
          new Promise((resolve) => {
            pbkdf2('x', 'y', 800 * 800, 32, 'sha256', resolve);
          }),
      ),
    ).then(() => (poolDone = true));
    expect(await client.send(url, notifyBody(url))).toMatchObject({ status: 200 });
    expect(poolDone).toBe(false);
    await pool;
  });
});

describe('requests in flight per address and per user', () => {
  const DELAY_MS = 150;

  it('lets any number wait for an address by default: a large room on one gateway is sent whole, never turned back', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'answer', delayMs: 20 });
    const client = aClient({ maxInFlightPerAddress: 2, maxInFlightPerOrigin: 2 });
    const exchanges = await Promise.all(
      Array.from({ length: 12 }, async (_, index) =>
        client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, `key-${index}`)),
      ),
    );
    expect(exchanges.map((exchange) => (exchange.kind === 'response' ? exchange.status : exchange.kind))).toEqual(
      Array.from({ length: 12 }, () => 200),
    );
  });

  it('holds an address to its cap however many names point at it; as many wait, the rest are not sent', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'answer', delayMs: DELAY_MS });
    const names = Array.from({ length: 6 }, (_, index) => `n${index}.test`);
    const dns = await aDnsServer(...names);
    const client = aClient({
      maxInFlightPerAddress: 2,
      maxWaitingPerKey: 2,
      maxInFlightPerOrigin: 10,
      dns: { servers: [dns.server] },
    });
    // Each name resolved once first, so that the requests below reach the address's line in call order.
    for (const name of names) await client.send(byName(gateway, name), notifyBody(byName(gateway, name)));
    gateway.clearRequests();
    const exchanges = await Promise.all(
      names.map(async (name, index) =>
        client.send(byName(gateway, name), notifyBody(gateway.notifyUrl, `key-${index}`)),
      ),
    );
    expect(exchanges.map((exchange) => (exchange.kind === 'response' ? exchange.status : exchange))).toEqual([
      200,
      200,
      200,
      200,
      { kind: 'not-sent', reason: 'address-busy' },
      { kind: 'not-sent', reason: 'address-busy' },
    ]);
    expect(classifyExchange(exchanges[5] as GatewayExchange, Date.now())).toEqual({ kind: 'retry', cause: 'busy' });
    expect(gateway.requests).toHaveLength(4);
    expect(mostAtOnce(gateway.requests, DELAY_MS)).toBe(2);
    expect(client.keysHeld).toEqual({ users: 0, origins: 0, addresses: 0 });
  });

  it('keeps a silent address to its cap: another address gets a global slot at once', async () => {
    const silent = await aGateway();
    silent.behave({ kind: 'hang' });
    // A second address of loopback (Linux answers on all of 127.0.0.0/8).
    const healthy = createServer((request, response) => {
      request.resume();
      request.on('end', () => response.end('{"rejected":[]}'));
    });
    servers.push(healthy);
    await new Promise<void>((resolve) => healthy.listen(0, '127.0.0.2', resolve));
    const healthyUrl = `http://127.0.0.2:${(healthy.address() as AddressInfo).port}/_matrix/push/v1/notify`;
    const names = Array.from({ length: 8 }, (_, index) => `silent${index}.test`);
    const dns = await aDnsServer(...names);
    const client = aClient({
      allowlist: parseAddressAllowlist('127.0.0.0/8'),
      maxInFlight: 3,
      maxInFlightPerAddress: 2,
      maxWaitingPerKey: 2,
      headersTimeoutMs: 600,
      dns: { servers: [dns.server] },
    });
    const stuck = names.map(async (name) => client.send(byName(silent, name), notifyBody(silent.notifyUrl)));
    await silent.waitForRequests(2);
    const started = performance.now();
    expect(await client.send(healthyUrl, notifyBody(healthyUrl))).toMatchObject({ status: 200 });
    expect(performance.now() - started).toBeLessThan(500);
    const exchanges = await Promise.all(stuck);
    expect(exchanges.filter((exchange) => exchange.kind === 'not-sent')).toHaveLength(4);
    expect(silent.requests.length).toBeLessThanOrEqual(4);
  });

  it('counts an IP literal and a name of it against one address', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'answer', delayMs: DELAY_MS });
    const dns = await aDnsServer('push.test');
    const client = aClient({ maxInFlightPerAddress: 1, dns: { servers: [dns.server] } });
    await client.send(byName(gateway, 'push.test'), notifyBody(gateway.notifyUrl));
    gateway.clearRequests();
    const literal = gateway.notifyUrl.replace('127.0.0.1', '[::ffff:127.0.0.1]');
    await Promise.all([
      client.send(byName(gateway, 'push.test'), notifyBody(gateway.notifyUrl, 'key-1')),
      client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, 'key-2')),
      client.send(literal, notifyBody(gateway.notifyUrl, 'key-3')),
    ]);
    expect(mostAtOnce(gateway.requests, DELAY_MS)).toBe(1);
  });

  it('holds a user to their cap across gateways, other users unhindered; as many wait, the rest are not sent', async () => {
    const gateways = [await aGateway(), await aGateway()];
    for (const gateway of gateways) gateway.behave({ kind: 'answer', delayMs: DELAY_MS });
    const client = aClient({ maxInFlightPerUser: 2, maxWaitingPerKey: 2 });
    const send = async (userId: string, index: number) => {
      const { notifyUrl } = gateways[index % 2] as PushGatewayDouble;
      return client.send(notifyUrl, notifyBody(notifyUrl, `${userId === ALICE ? 'alice' : 'bob'}-${index}`), {
        userId,
      });
    };
    const alice = Array.from({ length: 5 }, async (_, index) => send(ALICE, index));
    const bob = Array.from({ length: 2 }, async (_, index) => send(BOB, index));
    const [aliceExchanges, bobExchanges] = await Promise.all([Promise.all(alice), Promise.all(bob)]);
    expect(aliceExchanges.map((exchange) => exchange.kind)).toEqual([
      'response',
      'response',
      'response',
      'response',
      'not-sent',
    ]);
    expect(aliceExchanges[4]).toEqual({ kind: 'not-sent', reason: 'user-busy' });
    expect(bobExchanges.map((exchange) => exchange.kind)).toEqual(['response', 'response']);
    const requests = gateways.flatMap((gateway) => gateway.requests);
    const of = (tag: string) => requests.filter((request) => request.pushkeys[0]?.startsWith(tag));
    expect(mostAtOnce(of('alice'), DELAY_MS)).toBe(2);
    expect(mostAtOnce(of('bob'), DELAY_MS)).toBe(2);
    expect(mostAtOnce(requests, DELAY_MS)).toBe(4);
    expect(client.keysHeld).toEqual({ users: 0, origins: 0, addresses: 0 });
  });

  it('puts no cap on a send without a user (the two-argument call)', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'answer', delayMs: DELAY_MS });
    const client = aClient({ maxInFlightPerUser: 1 });
    await Promise.all(
      Array.from({ length: 4 }, async (_, index) =>
        client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, `key-${index}`)),
      ),
    );
    expect(mostAtOnce(gateway.requests, DELAY_MS)).toBe(4);
  });

  it('refuses the user’s and the address’s waiting sends on close', async () => {
    const gateway = await aGateway();
    gateway.behave({ kind: 'answer', delayMs: 200 });
    const client = aClient({ maxInFlightPerUser: 1, maxInFlightPerAddress: 1 });
    const inFlight = client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, 'key-1'), { userId: ALICE });
    const waitingForUser = client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, 'key-2'), { userId: ALICE });
    const waitingForAddress = client.send(gateway.notifyUrl, notifyBody(gateway.notifyUrl, 'key-3'), { userId: BOB });
    await gateway.waitForRequests(1);
    const closed = client.close();
    await expect(waitingForUser).rejects.toBeInstanceOf(GatewayClientClosedError);
    await expect(waitingForAddress).rejects.toBeInstanceOf(GatewayClientClosedError);
    expect(await inFlight).toMatchObject({ status: 200 });
    await closed;
    expect(client.keysHeld).toEqual({ users: 0, origins: 0, addresses: 0 });
  });
});
