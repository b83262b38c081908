/**
 * A worker started with `--inspect=127.0.0.1:<port>`, driven over the
 * DevTools protocol: force a full garbage collection, read its memory
 * figures, take a heap snapshot. Only the memory scenario uses it; the
 * inspector costs nothing measurable while no one asks it anything.
 */

export interface Inspector {
  call(method: string, params?: object): Promise<unknown>;
  /** Two full collections (the second frees what finalizers of the first released). */
  collectGarbage(): Promise<void>;
  /** A JSON-valued expression evaluated in the worker's main context. */
  evaluate<T>(expression: string): Promise<T>;
  /** The whole snapshot, as text (it can be 100 MB). */
  heapSnapshot(): Promise<string>;
  close(): void;
}

export async function connectInspector(port: number): Promise<Inspector> {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as {
    webSocketDebuggerUrl?: string;
  }[];
  const url = targets[0]?.webSocketDebuggerUrl;
  if (url === undefined) throw new Error(`no inspector target on port ${port}`);
  const socket = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener(
      'open',
      () => {
        resolve();
      },
      { once: true },
    );
    socket.addEventListener(
      'error',
      () => {
        reject(new Error(`cannot connect to ${url}`));
      },
      { once: true },
    );
  });
  let nextId = 1;
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  const chunks: string[] = [];
  socket.addEventListener('message', (message: MessageEvent) => {
    const data = JSON.parse(String(message.data)) as {
      id?: number;
      result?: unknown;
      error?: { message: string };
      method?: string;
      params?: { chunk?: string };
    };
    if (data.method === 'HeapProfiler.addHeapSnapshotChunk') {
      chunks.push(data.params?.chunk ?? '');
      return;
    }
    if (data.id === undefined) return;
    const waiter = pending.get(data.id);
    pending.delete(data.id);
    if (data.error !== undefined) waiter?.reject(new Error(data.error.message));
    else waiter?.resolve(data.result);
  });
  const call = async (method: string, params: object = {}): Promise<unknown> =>
    new Promise((resolve, reject) => {
      const id = nextId;
      nextId += 1;
      pending.set(id, { resolve, reject });
      socket.send(JSON.stringify({ id, method, params }));
    });
  return {
    call,
    collectGarbage: async () => {
      await call('HeapProfiler.collectGarbage');
      await call('HeapProfiler.collectGarbage');
    },
    evaluate: async <T>(expression: string) => {
      const answer = (await call('Runtime.evaluate', { expression, returnByValue: true })) as {
        result: { value: T };
        exceptionDetails?: unknown;
      };
      if (answer.exceptionDetails !== undefined)
        throw new Error(`evaluating ${expression} failed: ${JSON.stringify(answer.exceptionDetails).slice(0, 300)}`);
      return answer.result.value;
    },
    heapSnapshot: async () => {
      chunks.length = 0;
      await call('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
      const text = chunks.join('');
      chunks.length = 0;
      return text;
    },
    close: () => {
      socket.close();
    },
  };
}

/** What the worker says of its own memory, with the kernel's resident set. */
export interface MemoryFigures {
  readonly rssBytes: number;
  readonly heapUsed: number;
  readonly heapTotal: number;
  readonly external: number;
  readonly arrayBuffers: number;
  /** V8's `malloced_memory`: memory V8 itself took outside its heap. */
  readonly mallocedMemory: number;
}

export const MEMORY_EXPRESSION =
  '(() => { const m = process.memoryUsage(); const h = process.getBuiltinModule("node:v8").getHeapStatistics(); return { heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers, mallocedMemory: h.malloced_memory }; })()';

/** Self size and count of heap objects, by kind: `object Foo`, `closure f`, `(string)`, `array (object elements)`, ... */
export type HeapSummary = Map<string, { count: number; bytes: number }>;

interface SnapshotJson {
  readonly snapshot: {
    readonly meta: { readonly node_fields: readonly string[]; readonly node_types: readonly unknown[] };
  };
  readonly nodes: readonly number[];
  readonly strings: readonly string[];
}

const STRING_TYPES = new Set(['string', 'concatenated string', 'sliced string']);

/** Sums a heap snapshot's nodes by kind (their own sizes, not what they retain). */
export function summarizeHeapSnapshot(snapshot: SnapshotJson): HeapSummary {
  const fields = snapshot.snapshot.meta.node_fields;
  const stride = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const types = snapshot.snapshot.meta.node_types[0] as readonly string[];
  const summary: HeapSummary = new Map();
  for (let i = 0; i < snapshot.nodes.length; i += stride) {
    const type = types[snapshot.nodes[i + typeAt] ?? 0] ?? '?';
    const name = snapshot.strings[snapshot.nodes[i + nameAt] ?? 0] ?? '';
    const key = STRING_TYPES.has(type)
      ? '(string)'
      : type === 'number'
        ? '(heap number)'
        : type === 'code'
          ? '(code)'
          : `${type} ${name === '' ? '(no name)' : name.slice(0, 60)}`;
    const entry = summary.get(key) ?? { count: 0, bytes: 0 };
    entry.count += 1;
    entry.bytes += snapshot.nodes[i + sizeAt] ?? 0;
    summary.set(key, entry);
  }
  return summary;
}

export interface HeapGrowthRow {
  readonly kind: string;
  readonly count: number;
  readonly bytes: number;
}

/** What grew between two summaries, largest first: the `top` kinds, then the rest in one row. */
export function heapGrowth(before: HeapSummary, after: HeapSummary, top = 12): HeapGrowthRow[] {
  const rows: HeapGrowthRow[] = [];
  for (const [kind, { count, bytes }] of after) {
    const was = before.get(kind) ?? { count: 0, bytes: 0 };
    rows.push({ kind, count: count - was.count, bytes: bytes - was.bytes });
  }
  for (const [kind, was] of before) if (!after.has(kind)) rows.push({ kind, count: -was.count, bytes: -was.bytes });
  rows.sort((a, b) => b.bytes - a.bytes);
  const head = rows.slice(0, top);
  const rest = rows.slice(top);
  if (rest.length > 0)
    head.push({
      kind: `(${rest.length} other kinds)`,
      count: rest.reduce((s, r) => s + r.count, 0),
      bytes: rest.reduce((s, r) => s + r.bytes, 0),
    });
  return head;
}
