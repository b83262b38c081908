import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * The `notify` messages and parts the broker still holds for a delivery
 * queue (`queue` and its partition queues `<queue>.pNNN`), ready or taken
 * by a worker and not yet acknowledged, as the local node's `rabbitmqctl`
 * counts them; undefined when it cannot say (no rabbitmqctl, a broker on
 * another host). AMQP's own count (`checkQueue`) leaves out the parts a
 * consumer holds: those a worker is still planning, or took back after a
 * lease ran out and has not secured yet.
 */
export async function brokerBacklog(queue: string): Promise<number | undefined> {
  try {
    const { stdout } = await run('rabbitmqctl', ['-q', 'list_queues', 'name', 'messages', '--no-table-headers'], {
      timeout: 60_000,
    });
    let total = 0;
    for (const line of stdout.split('\n')) {
      const [name, messages] = line.split('\t');
      if (name === queue || (name?.startsWith(`${queue}.p`) ?? false)) total += Number(messages);
    }
    return Number.isFinite(total) ? total : undefined;
  } catch {
    return undefined;
  }
}
