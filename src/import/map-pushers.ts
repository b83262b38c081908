import { isJsonObject } from '../matrix/json.js';
import { parseUntrustedJson } from '../matrix/parse-untrusted-json.js';
import { decidePusherSet, type PusherPolicy } from '../pushers/decide-pusher-set.js';
import type { StoredPusher } from '../pushers/pusher.js';
import type { SynapsePusherRow } from './synapse-rows.js';

/** Why a `pushers` row was not imported (docs/import-from-synapse.md#what-is-skipped-and-why). */
export type PusherSkipReason =
  /** `data` is NULL or does not parse: Synapse's GET hides the pusher too. */
  | 'unparsable-json'
  /** `set_pusher` would refuse these values (kind, data, URL, lengths). */
  | 'invalid-pusher'
  /** `ts` is not a count of milliseconds. */
  | 'invalid-timestamp';

export interface SkippedPusherRow {
  readonly userId: string;
  readonly appId: string;
  readonly pushkey: string;
  readonly reason: PusherSkipReason;
  readonly detail: string;
}

export interface ImportedPusher {
  readonly pusher: StoredPusher;
  /** Synapse's `ts`: when the pushkey was last set, in milliseconds (the spec's `pushkey_ts`). */
  readonly pushkeyTs: number;
  /** `lang` was NULL in Synapse (shown as null there); stored as `""`. */
  readonly langWasNull: boolean;
}

export interface MappedPushers {
  readonly pushers: readonly ImportedPusher[];
  readonly skipped: readonly SkippedPusherRow[];
}

/** Data JSON nests little; a gateway's `default_payload` may add a few levels. */
const MAX_DATA_JSON_DEPTH = 32;

/**
 * Rows of `pushers` as the pushers `get_pushers` lists after the import
 * (docs/import-from-synapse.md#how-pushers-map). Each row passes the checks
 * of `set_pusher` under `policy`, so nothing is stored that this service
 * would refuse from a client.
 */
export function mapPushers(rows: readonly SynapsePusherRow[], policy: PusherPolicy): MappedPushers {
  const pushers: ImportedPusher[] = [];
  const skipped: SkippedPusherRow[] = [];
  for (const row of rows) {
    const mapped = mapPusher(row, policy);
    if (mapped.ok) pushers.push(mapped.value);
    else
      skipped.push({
        userId: row.user_name,
        appId: row.app_id,
        pushkey: row.pushkey,
        reason: mapped.reason,
        detail: mapped.detail,
      });
  }
  return { pushers, skipped };
}

type Mapped =
  | { readonly ok: true; readonly value: ImportedPusher }
  | { readonly ok: false; readonly reason: PusherSkipReason; readonly detail: string };

function mapPusher(row: SynapsePusherRow, policy: PusherPolicy): Mapped {
  if (row.data === null) return { ok: false, reason: 'unparsable-json', detail: 'data is NULL' };
  const data = parseUntrustedJson(row.data, { maxDepth: MAX_DATA_JSON_DEPTH });
  if (!data.ok) return { ok: false, reason: 'unparsable-json', detail: `data: ${data.message}` };
  if (!isJsonObject(data.value)) return { ok: false, reason: 'invalid-pusher', detail: 'data is not an object' };
  const pushkeyTs = Number(row.ts);
  if (!Number.isSafeInteger(pushkeyTs) || pushkeyTs < 0) {
    return { ok: false, reason: 'invalid-timestamp', detail: `ts ${String(row.ts)}` };
  }
  // Synapse reads a NULL `enabled` (or a schema without the column) as enabled.
  const enabled = row.enabled === null || row.enabled === undefined ? true : Boolean(row.enabled);
  const plan = decidePusherSet(
    row.user_name,
    {
      pushkey: row.pushkey,
      kind: row.kind,
      app_id: row.app_id,
      app_display_name: row.app_display_name,
      device_display_name: row.device_display_name,
      profile_tag: row.profile_tag,
      lang: row.lang ?? '',
      data: data.value,
      enabled,
    },
    policy,
    { deviceId: row.device_id ?? undefined },
  );
  if (!plan.ok) return { ok: false, reason: 'invalid-pusher', detail: plan.error.message };
  if (plan.value.type !== 'upsert') return { ok: false, reason: 'invalid-pusher', detail: 'no pusher kind' };
  return {
    ok: true,
    value: { pusher: { ...plan.value.pusher, user_id: row.user_name }, pushkeyTs, langWasNull: row.lang === null },
  };
}
