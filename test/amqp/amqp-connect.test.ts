import { Socket } from 'node:net';
import type { ChannelModel } from 'amqplib';
import { describe, expect, it } from 'vitest';
import { coalesceWrites, withHeartbeat } from '../../src/amqp/amqp-connect.js';

describe('withHeartbeat', () => {
  it.each([
    ['amqp://guest:guest@127.0.0.1:5672', 10, 'amqp://guest:guest@127.0.0.1:5672?heartbeat=10'],
    ['amqp://guest:guest@127.0.0.1:5672/', 0, 'amqp://guest:guest@127.0.0.1:5672/?heartbeat=0'],
    ['amqp://u@h/vhost?frameMax=8192', 5, 'amqp://u@h/vhost?frameMax=8192&heartbeat=5'],
    ['amqp://u@h?heartbeat=60', 7, 'amqp://u@h?heartbeat=7'],
    [
      'amqps://front:p%40ss%2Fw%3Ard@rabbit.example.org:5671/%2F',
      15,
      'amqps://front:p%40ss%2Fw%3Ard@rabbit.example.org:5671/%2F?heartbeat=15',
    ],
  ])('%s with %i s → %s', (url, seconds, expected) => {
    expect(withHeartbeat(url, seconds)).toBe(expected);
  });

  it('leaves the URL alone when no heartbeat is configured', () => {
    expect(withHeartbeat('amqp://u@h?heartbeat=60', undefined)).toBe('amqp://u@h?heartbeat=60');
  });
});

describe('coalesceWrites', () => {
  it("corks the socket for each turn of amqplib's multiplexer, and uncorks it after, even when the turn throws", () => {
    const stream = new Socket();
    const corkedDuringTurn: number[] = [];
    const muxer = {
      turns: 0,
      _readIncoming(this: { turns: number }) {
        this.turns += 1;
        corkedDuringTurn.push(stream.writableCorked);
        if (this.turns === 2) throw new Error('channel gone');
        return 'read';
      },
    };
    const model = { connection: { stream, muxer } } as unknown as ChannelModel;
    expect(coalesceWrites(model)).toBe(true);
    expect(muxer._readIncoming()).toBe('read');
    expect(() => muxer._readIncoming()).toThrow('channel gone');
    expect(corkedDuringTurn).toEqual([1, 1]);
    expect(stream.writableCorked).toBe(0);
    expect(muxer.turns).toBe(2);
    stream.destroy();
  });

  it('changes nothing when amqplib is not shaped as expected', () => {
    expect(coalesceWrites({} as unknown as ChannelModel)).toBe(false);
    expect(
      coalesceWrites({
        connection: { stream: {}, muxer: { _readIncoming: () => undefined } },
      } as unknown as ChannelModel),
    ).toBe(false);
  });
});
