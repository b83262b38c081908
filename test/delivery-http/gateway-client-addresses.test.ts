import { execFile } from 'node:child_process';
import { pbkdf2 } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyExchange } from '../../src/delivery/response-outcome.js';
import {
  aClient,
  aDnsServer,
  aGateway,
  byName,
  notifyBody,
  useGatewayClientWorld,
} from '../support/gateway-client-world.js';
import type { PushGatewayDouble } from '../support/push-gateway-double.js';
import { makeThrowawayCa, type ThrowawayCa, throwawayCaUnavailable } from '../support/throwaway-ca.js';

// What the client connects to: the addresses it may reach, the names it
// resolves first, and the certificates it trusts over HTTPS.

useGatewayClientWorld();

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
