import { execFile } from 'node:child_process';
import { hostname } from 'node:os';
import { promisify } from 'node:util';

/**
 * The local three-node RabbitMQ cluster of `scripts/services.sh cluster-*`
 * (push-a, push-b and push-c on 127.0.0.1:5681-5683), for tests of quorum
 * queues and node crashes. The script does the work; this only runs it and
 * reads what it prints, so that a test and an operator at a shell see the
 * same cluster. None of it touches the single broker on 5672.
 */

const run = promisify(execFile);
const SCRIPT = new URL('../../scripts/services.sh', import.meta.url).pathname;
/** From nothing the cluster takes ~25 s on two cores; a node ~5-10 s. Room for a loaded machine. */
const SCRIPT_TIMEOUT_MS = 240_000;

/**
 * The timeout of a hook that brings the cluster up (`clusterUp`, one run
 * of the script) or back (`restoreCluster`: a node started, the cluster
 * checked, the queues' members awaited): derived from the script's own
 * bound, not from how long it takes on a quiet machine. Since `npm test`
 * stops the cluster it started, each run forms it from nothing, which
 * with both cores busy took over the 120 s default.
 */
export const CLUSTER_HOOK_TIMEOUT_MS = 2 * SCRIPT_TIMEOUT_MS + 60_000;

export type NodeLetter = 'a' | 'b' | 'c';

export interface ClusterNode {
  /** The Erlang node name, as `list_queues leader` and the script print it: `push-a@<short hostname>`. */
  readonly name: string;
  readonly letter: NodeLetter;
  /** Its AMQP port on 127.0.0.1. */
  readonly port: number;
  /** guest/guest, which RabbitMQ accepts from the loopback interface only. */
  readonly url: string;
}

const LETTERS: readonly NodeLetter[] = ['a', 'b', 'c'];

/**
 * Starts what is not running and clusters it (idempotent: ~0.5 s when the
 * cluster is already up); resolves once all three run in one cluster.
 */
export async function clusterUp(): Promise<readonly ClusterNode[]> {
  const urls = (await services('cluster-up')).split('\n').filter((line) => line !== '');
  if (urls.length !== LETTERS.length)
    throw new Error(`cluster-up printed ${urls.length} URLs, not 3: ${urls.join(' ')}`);
  // The script names nodes after `hostname -s`, which is the host name up to
  // its first dot; asking it again would cost another rabbitmqctl start.
  const host = hostname().split('.')[0] ?? '';
  return LETTERS.map((letter, i) => {
    const url = urls[i] ?? '';
    return { name: `push-${letter}@${host}`, letter, port: Number(new URL(url).port), url };
  });
}

/** SIGKILLs the node's Erlang VM (a crash: no goodbye to peers or clients); resolves once its port is closed. */
export async function killNode(node: ClusterNode): Promise<void> {
  await services('cluster-kill', node.letter);
}

/** Starts a killed node on its own state; resolves once it runs and a peer counts it as running again. */
export async function startNode(node: ClusterNode): Promise<void> {
  await services('cluster-start', node.letter);
}

/**
 * The node that leads a quorum queue, as the cluster reports it. Right
 * after its leader died the queue may still name the dead node until a new
 * one is elected: poll (see `waitForLeader`) rather than read it once.
 */
export async function quorumLeader(queue: string): Promise<string> {
  return (await services('cluster-leader', queue)).trim();
}

/** The nodes a quorum queue has a replica on (whether they run or not), sorted. */
export async function quorumMembers(queue: string): Promise<readonly string[]> {
  const lines = (await services('cluster-members', queue)).split('\n').filter((line) => line !== '');
  return lines.sort();
}

/** The members of a quorum queue that are online now, sorted. */
export async function quorumOnline(queue: string): Promise<readonly string[]> {
  const lines = (await services('cluster-online', queue)).split('\n').filter((line) => line !== '');
  return lines.sort();
}

/**
 * Puts the cluster back as a test found it, whatever the test did to it:
 * starts every node in `down` (a test that failed between a kill and its
 * own restart leaves one down), waits until all three run in one cluster,
 * then until each of `queues` (quorum queues) has all three members online
 * and a leader among them. The next test then starts on a whole cluster,
 * so that one failure stays one failure.
 */
export async function restoreCluster(
  nodes: readonly ClusterNode[],
  down: Set<ClusterNode>,
  queues: readonly string[],
  timeoutMs = 60_000,
): Promise<void> {
  for (const node of [...down]) {
    await startNode(node);
    down.delete(node);
  }
  await clusterUp();
  const all = nodes.map((n) => n.name).sort();
  for (const queue of queues) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const online = await quorumOnline(queue).catch(() => []);
      if (online.length === all.length && online.every((name, i) => name === all[i])) break;
      if (Date.now() > deadline)
        throw new Error(
          `queue ${queue}: online members ${online.join(', ') || 'none'} after ${timeoutMs} ms, not ${all.join(', ')}`,
        );
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    await waitForLeader(queue, nodes, timeoutMs);
  }
}

/** Polls until the queue's leader is one of `among`; resolves with it. */
export async function waitForLeader(
  queue: string,
  among: readonly ClusterNode[],
  timeoutMs = 30_000,
): Promise<ClusterNode> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    // While an election is under way the script may find no leader and fail.
    last = await quorumLeader(queue).catch(() => '');
    const found = among.find((node) => node.name === last);
    if (found !== undefined) return found;
    if (Date.now() > deadline)
      throw new Error(
        `queue ${queue}: leader still '${last}' after ${timeoutMs} ms, not one of ${among.map((n) => n.name).join(', ')}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/**
 * The node a client connection is on, found by the connection name the
 * client gave (`clientProperties.connection_name`) or by its local port.
 * Any running node lists the whole cluster's connections.
 */
export async function nodeOfConnection(nameOrClientPort: string | number): Promise<string> {
  return (await services('cluster-connection-node', String(nameOrClientPort))).trim();
}

/** The node of `nodes` with this Erlang name. */
export function nodeNamed(nodes: readonly ClusterNode[], name: string): ClusterNode {
  const node = nodes.find((n) => n.name === name);
  if (node === undefined) throw new Error(`no node ${name} in ${nodes.map((n) => n.name).join(', ')}`);
  return node;
}

/** Runs `scripts/services.sh <args>`; its stdout, or an error that carries the script's log (stderr). */
async function services(...args: string[]): Promise<string> {
  try {
    const { stdout } = await run(SCRIPT, args, { timeout: SCRIPT_TIMEOUT_MS, encoding: 'utf8' });
    return stdout;
  } catch (error: unknown) {
    const stderr = typeof error === 'object' && error !== null && 'stderr' in error ? String(error.stderr) : '';
    throw new Error(`scripts/services.sh ${args.join(' ')} failed:\n${stderr}`, { cause: error });
  }
}
