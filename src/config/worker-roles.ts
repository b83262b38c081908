/**
 * What a worker may run (docs/operations.md#running-by-role): `rpc` the
 * request queue (every push-rule and pusher op), `read` the read queue,
 * `evaluate` the evaluate queue (and its threads), `deliver` push delivery
 * (the `notify` queue's router, the partitions, their intake and sends).
 * All four by default.
 */
export const WORKER_ROLES = ['rpc', 'read', 'evaluate', 'deliver'] as const;

export type WorkerRole = (typeof WORKER_ROLES)[number];

/** Which roles a worker runs. Frozen: decided once, from the validated configuration. */
export type WorkerRoles = Readonly<Record<WorkerRole, boolean>>;

function isRole(name: string): name is WorkerRole {
  return (WORKER_ROLES as readonly string[]).includes(name);
}

/**
 * The roles `names` gives, or what is wrong with them: none at all, one
 * that is not a role, or one named twice.
 */
export function parseWorkerRoles(
  names: readonly string[],
): { readonly ok: true; readonly roles: WorkerRoles } | { readonly ok: false; readonly problem: string } {
  const known = `the roles are ${WORKER_ROLES.join(', ')}`;
  if (names.length === 0) return { ok: false, problem: `names no role: give one or more (${known})` };
  const seen = new Set<string>();
  for (const name of names) {
    if (!isRole(name)) return { ok: false, problem: `${JSON.stringify(name)} is not a role (${known})` };
    if (seen.has(name)) return { ok: false, problem: `names ${JSON.stringify(name)} twice` };
    seen.add(name);
  }
  const roles = Object.fromEntries(WORKER_ROLES.map((role) => [role, seen.has(role)])) as Record<WorkerRole, boolean>;
  return { ok: true, roles: Object.freeze(roles) };
}
