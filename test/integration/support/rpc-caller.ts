import { randomUUID } from 'node:crypto';
import amqp, { type Channel, type ChannelModel, type Options } from 'amqplib';

const REPLY_QUEUE = 'amq.rabbitmq.reply-to';

export interface ContractReply {
  readonly ok: boolean;
  readonly body?: unknown;
  readonly error?: { kind: string; errcode: string; error: string; status: number };
}

/** A minimal RPC caller for tests: direct reply-to, one pending map. */
export class RpcCaller {
  readonly #pending = new Map<string, { resolve: (reply: ContractReply) => void; timer: NodeJS.Timeout }>();

  private constructor(
    private readonly connection: ChannelModel,
    readonly channel: Channel,
  ) {}

  static async open(url: string): Promise<RpcCaller> {
    const connection = await amqp.connect(url, { noDelay: true });
    const channel = await connection.createChannel();
    const caller = new RpcCaller(connection, channel);
    await channel.consume(
      REPLY_QUEUE,
      (message) => {
        if (message === null) return;
        const id = message.properties.correlationId as string;
        const pending = caller.#pending.get(id);
        if (pending === undefined) return;
        clearTimeout(pending.timer);
        caller.#pending.delete(id);
        pending.resolve(JSON.parse(message.content.toString('utf8')) as ContractReply);
      },
      { noAck: true },
    );
    return caller;
  }

  /** Publishes a request and resolves with its reply (rejects after `timeoutMs`). */
  async call(
    queue: string,
    body: unknown,
    properties: Options.Publish = {},
    timeoutMs = 15_000,
  ): Promise<ContractReply> {
    const correlationId: string =
      typeof properties.correlationId === 'string' ? properties.correlationId : randomUUID();
    const content = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
    return new Promise<ContractReply>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(correlationId);
        reject(new Error(`no reply to ${correlationId} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(correlationId, { resolve, timer });
      this.channel.sendToQueue(queue, content, {
        replyTo: REPLY_QUEUE,
        contentType: 'application/json',
        ...properties,
        correlationId,
      });
    });
  }

  /** Publishes without waiting for anything (for requests that get no reply). */
  publish(queue: string, content: Buffer, properties: Options.Publish): void {
    this.channel.sendToQueue(queue, content, properties);
  }

  async close(): Promise<void> {
    for (const { timer } of this.#pending.values()) clearTimeout(timer);
    await this.connection.close();
  }
}
