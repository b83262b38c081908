import type { Server } from 'node:http';
import { afterEach } from 'vitest';
import { parseAddressAllowlist } from '../../src/delivery/address-allowlist.js';
import { gatewayRequestBody, type GatewayRequestBody } from '../../src/delivery/gateway-payload.js';
import { GatewayClient } from '../../src/delivery-http/gateway-client.js';
import type { GatewayClientOptions } from '../../src/delivery-http/gateway-client-options.js';
import { DnsDouble } from './dns-double.js';
import { aDeliveryPusher, aNotification, aPushedPlan, aRecipient } from './notify-builders.js';
import { PushGatewayDouble } from './push-gateway-double.js';

/**
 * What the tests of test/delivery-http/gateway-client*.test.ts send through:
 * gateway doubles, DNS doubles and clients, each stopped after the test
 * (`useGatewayClientWorld`).
 */

/** The double listens on 127.0.0.1, which the address policy refuses unless the operator opens it. */
const LOOPBACK = parseAddressAllowlist('127.0.0.1/32');

/** A notify body for one device of Alice's per pushkey, as the delivery planning builds it. */
export function notifyBody(url: string, ...pushkeys: string[]): GatewayRequestBody {
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
/** Servers a test starts itself (node:http), closed after it. */
export const servers: Server[] = [];
const dnsDoubles: DnsDouble[] = [];

/** Stops after each test what it started: call once at the top of a test file. */
export function useGatewayClientWorld(): void {
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
}

export async function aGateway(tls?: { readonly key: string; readonly cert: string }): Promise<PushGatewayDouble> {
  const double = await PushGatewayDouble.start(tls === undefined ? {} : { tls });
  doubles.push(double);
  return double;
}

export function aClient(options: GatewayClientOptions = {}): GatewayClient {
  const client = new GatewayClient({ allowlist: LOOPBACK, ...options });
  clients.push(client);
  return client;
}

/** A DNS server answering each of `names` with 127.0.0.1, where the gateway doubles listen. */
export async function aDnsServer(...names: string[]): Promise<DnsDouble> {
  const dns = await DnsDouble.start();
  dnsDoubles.push(dns);
  for (const name of names) dns.set(name, { a: ['127.0.0.1'] });
  return dns;
}

/** The gateway's notify URL under another name. */
export function byName(gateway: PushGatewayDouble, name: string): string {
  return gateway.notifyUrl.replace('127.0.0.1', name);
}
