import { describe, expect, it } from 'vitest';
import { AddressRotation, firstBrokerUrl } from '../../src/amqp/broker-addresses.js';
import { parseBrokerAddresses, type BrokerAddress } from '../../src/config/broker-urls.js';

/** `random` that returns these values in turn (then the last one again). */
function randomOf(...values: number[]): () => number {
  let i = 0;
  return () => values[Math.min(i++, values.length - 1)] ?? 0;
}

const nodes = (...labels: string[]): BrokerAddress[] => labels.map((label) => ({ url: `amqp://${label}`, label }));
const labels = (addresses: readonly BrokerAddress[]) => addresses.map((a) => a.label);

describe('parseBrokerAddresses', () => {
  it.each([
    ['one URL', 'amqp://guest:guest@127.0.0.1:5672', ['127.0.0.1:5672']],
    ['the default ports', 'amqp://rabbit, amqps://rabbit-tls', ['rabbit:5672', 'rabbit-tls:5671']],
    [
      'a comma-separated list, blanks around entries',
      ' amqp://a:5681 ,amqp://b:5682,  amqp://c:5683',
      ['a:5681', 'b:5682', 'c:5683'],
    ],
    ['an array', ['amqp://a:5681', 'amqp://b:5682'], ['a:5681', 'b:5682']],
    ['IPv6 hosts', 'amqp://[::1]:5672', ['[::1]:5672']],
  ])('reads %s', (_case, urls, expected) => {
    expect(labels(parseBrokerAddresses(urls))).toEqual(expected);
  });

  it('keeps each entry whole: its own credentials, vhost and query', () => {
    const [a, b] = parseBrokerAddresses('amqp://u1:p1@a:5672/one?heartbeat=5,amqp://u2:p2@b:5672/two');
    expect(a?.url).toBe('amqp://u1:p1@a:5672/one?heartbeat=5');
    expect(b?.url).toBe('amqp://u2:p2@b:5672/two');
  });

  it.each([
    ['nothing', '', 'no broker URL is given'],
    ['an empty entry', 'amqp://a,,amqp://b', 'broker URL #2 is empty'],
    ['a trailing comma', 'amqp://a,', 'broker URL #2 is empty'],
    ['a bare host:port', 'amqp://a:5672,b:5672', 'broker URL #2 must start with amqp:// or amqps://'],
    ['another scheme', 'http://a', 'broker URL #1 must start with amqp://'],
    ['text that is not a URL', 'amqp://a:port', 'broker URL #1 is not a URL'],
    ['a node twice', 'amqp://a,amqp://x@a:5672', 'broker a:5672 is listed twice'],
  ])('refuses %s', (_case, urls, message) => {
    expect(() => parseBrokerAddresses(urls)).toThrow(message);
  });

  it.each([
    ['a bad port', 'amqp://user:s3cret@a:port'],
    ['no scheme', 'user:s3cret@rabbit:5672'],
    ['one slash', 'amqp:/user:s3cret@rabbit'],
    ['a slash in the password', 'amqp://user:s3/cret@rabbit:port'],
    ['a space', 'amqp://user:s3cret@rabbit :5672'],
  ])('never echoes an entry it refuses (%s): its password could be anywhere in it', (_case, url) => {
    expect(() => parseBrokerAddresses(url)).toThrow(/^broker URL #1 /);
    expect(() => parseBrokerAddresses(url)).not.toThrow(/s3/);
  });

  it('refuses an array entry that holds two URLs', () => {
    expect(() => parseBrokerAddresses(['amqp://a,amqp://b'])).toThrow('broker URL #1 contains a comma or a space');
  });

  it('firstBrokerUrl is the first entry as given', () => {
    expect(firstBrokerUrl('amqp://a:1, amqp://b:2')).toBe('amqp://a:1');
    expect(firstBrokerUrl(['amqp://b:2'])).toBe('amqp://b:2');
  });
});

describe('AddressRotation', () => {
  it('shuffles once per process (Fisher–Yates driven by random)', () => {
    // i = 2: j = floor(0.0 * 3) = 0 → [c, b, a]; i = 1: j = floor(0.99 * 2) = 1 → unchanged.
    expect(labels(new AddressRotation(nodes('a', 'b', 'c'), randomOf(0, 0.99)).order)).toEqual(['c', 'b', 'a']);
    // random near 1 keeps every element where it is.
    expect(labels(new AddressRotation(nodes('a', 'b', 'c'), randomOf(0.99)).order)).toEqual(['a', 'b', 'c']);
  });

  it('spreads a pool over the nodes: every node comes first for some processes', () => {
    const firsts = new Set<string>();
    for (let seed = 0; seed < 50; seed += 1) {
      const values = [(seed % 10) / 10, ((seed * 7) % 10) / 10];
      firsts.add(new AddressRotation(nodes('a', 'b', 'c'), randomOf(...values)).take().label);
    }
    expect([...firsts].sort()).toEqual(['a', 'b', 'c']);
  });

  it('goes round-robin, the node after the last one on each take', () => {
    const rotation = new AddressRotation(nodes('a', 'b', 'c'), randomOf(0.99));
    expect([rotation.take(), rotation.take(), rotation.take(), rotation.take()].map((a) => a.label)).toEqual([
      'a',
      'b',
      'c',
      'a',
    ]);
  });

  it('asks for a backoff only after a whole round failed, counting the rounds', () => {
    const rotation = new AddressRotation(nodes('a', 'b', 'c'), randomOf(0.99));
    const outcomes: (number | undefined)[] = [];
    for (let i = 0; i < 7; i += 1) {
      rotation.take();
      outcomes.push(rotation.failed());
    }
    expect(outcomes).toEqual([undefined, undefined, 1, undefined, undefined, 2, undefined]);
  });

  it('starts over after a success: the next loss tries the next node at once, rounds counted from one', () => {
    const rotation = new AddressRotation(nodes('a', 'b', 'c'), randomOf(0.99));
    rotation.take();
    rotation.failed();
    expect(rotation.take().label).toBe('b');
    rotation.succeeded();
    // b is lost: c at once, then a, then b again completes the round.
    const attempts = [0, 1, 2].map(() => {
      const label = rotation.take().label;
      return [label, rotation.failed()];
    });
    expect(attempts).toEqual([
      ['c', undefined],
      ['a', undefined],
      ['b', 1],
    ]);
  });

  it('with one node, every failure is a whole round', () => {
    const rotation = new AddressRotation(nodes('only'));
    rotation.take();
    expect(rotation.failed()).toBe(1);
    rotation.take();
    expect(rotation.failed()).toBe(2);
  });

  it('refuses an empty list', () => {
    expect(() => new AddressRotation([])).toThrow('no broker address');
  });
});
