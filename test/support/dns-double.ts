import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { parseIp } from '../../src/delivery/cidr.js';

/**
 * A DNS server for tests: UDP on 127.0.0.1, answering A and AAAA queries
 * from a table, recording every question, and misbehaving on demand (no
 * answer at all, a late one, NXDOMAIN, SERVFAIL). Enough of RFC 1035 for
 * c-ares (`dns.promises.Resolver` with `setServers([double.server])`): one
 * question per query, answers pointing back at it, nothing in the other
 * sections.
 */

const TYPE_A = 1;
const TYPE_AAAA = 28;

export interface DnsEntry {
  readonly a?: readonly string[];
  readonly aaaa?: readonly string[];
  /** Seconds; 60 unless given. */
  readonly ttl?: number;
  /** NXDOMAIN (the name does not exist) or SERVFAIL (the server failed); an answer otherwise. */
  readonly rcode?: 'NXDOMAIN' | 'SERVFAIL';
  /** Never answer (the client's timeouts end it). */
  readonly silent?: boolean;
  /** Answer this much later. */
  readonly delayMs?: number;
}

export interface DnsQuestion {
  readonly name: string;
  readonly type: 'A' | 'AAAA' | number;
  readonly at: number;
}

export class DnsDouble {
  readonly #socket: Socket;
  readonly #entries = new Map<string, DnsEntry>();
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly questions: DnsQuestion[] = [];

  private constructor(socket: Socket) {
    this.#socket = socket;
    socket.on('message', (message, peer) => {
      this.#answer(message, peer);
    });
  }

  static async start(): Promise<DnsDouble> {
    const socket = createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    return new DnsDouble(socket);
  }

  /** `127.0.0.1:port`, for `Resolver.setServers`. */
  get server(): string {
    return `127.0.0.1:${this.#socket.address().port}`;
  }

  /** What the name answers from now on (names are matched without case). */
  set(name: string, entry: DnsEntry): void {
    this.#entries.set(name.toLowerCase(), entry);
  }

  /** The questions asked about a name (A and AAAA each count). */
  asked(name: string): number {
    return this.questions.filter((question) => question.name === name.toLowerCase()).length;
  }

  async close(): Promise<void> {
    for (const timer of this.#timers) clearTimeout(timer);
    await new Promise<void>((resolve) =>
      this.#socket.close(() => {
        resolve();
      }),
    );
  }

  #answer(query: Buffer, peer: RemoteInfo): void {
    const question = readQuestion(query);
    if (question === undefined) return;
    const type = question.type === TYPE_A ? 'A' : question.type === TYPE_AAAA ? 'AAAA' : question.type;
    this.questions.push({ name: question.name, type, at: Date.now() });
    const entry = this.#entries.get(question.name) ?? { rcode: 'NXDOMAIN' };
    if (entry.silent === true) return;
    const addresses = type === 'A' ? (entry.a ?? []) : type === 'AAAA' ? (entry.aaaa ?? []) : [];
    const rcode = entry.rcode === 'NXDOMAIN' ? 3 : entry.rcode === 'SERVFAIL' ? 2 : 0;
    const response = encodeResponse(query, question.end, rcode, rcode === 0 ? addresses : [], entry.ttl ?? 60);
    const send = () => {
      this.#socket.send(response, peer.port, peer.address);
    };
    if (entry.delayMs === undefined) send();
    else {
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        send();
      }, entry.delayMs);
      this.#timers.add(timer);
    }
  }
}

/** The question's name (lower case), type, and where it ends (the question section is copied into the answer). */
function readQuestion(query: Buffer): { name: string; type: number; end: number } | undefined {
  if (query.length < 12 || query.readUInt16BE(4) < 1) return undefined;
  const labels: string[] = [];
  let offset = 12;
  while (offset < query.length) {
    const length = query.readUInt8(offset);
    offset += 1;
    if (length === 0) break;
    labels.push(query.toString('latin1', offset, offset + length));
    offset += length;
  }
  if (offset + 4 > query.length) return undefined;
  return { name: labels.join('.').toLowerCase(), type: query.readUInt16BE(offset), end: offset + 4 };
}

function encodeResponse(query: Buffer, questionEnd: number, rcode: number, addresses: readonly string[], ttl: number) {
  const header = Buffer.alloc(12);
  query.copy(header, 0, 0, 2);
  // QR, opcode 0, AA, RD as asked; RA; the rcode.
  header.writeUInt16BE(0x8400 | (query.readUInt16BE(2) & 0x0100) | 0x0080 | rcode, 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(addresses.length, 6);
  const answers = addresses.map((address) => {
    const ipv4 = !address.includes(':');
    const data = ipv4 ? Buffer.from(address.split('.').map(Number)) : ipv6Bytes(address);
    const record = Buffer.alloc(12);
    // The name: a pointer to the question's, at offset 12.
    record.writeUInt16BE(0xc00c, 0);
    record.writeUInt16BE(ipv4 ? TYPE_A : TYPE_AAAA, 2);
    record.writeUInt16BE(1, 4);
    record.writeUInt32BE(ttl, 6);
    record.writeUInt16BE(data.length, 10);
    return Buffer.concat([record, data]);
  });
  return Buffer.concat([header, query.subarray(12, questionEnd), ...answers]);
}

function ipv6Bytes(address: string): Buffer {
  const value = parseIp(address);
  if (value === undefined) throw new Error(`not an IPv6 address: ${address}`);
  const bytes = Buffer.alloc(16);
  for (let index = 15, rest = value; index >= 0; index -= 1, rest >>= 8n) bytes[index] = Number(rest & 0xffn);
  return bytes;
}
