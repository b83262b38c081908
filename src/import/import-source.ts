/** Where an import reads Synapse's database from (`--from`). */
export type ImportSource =
  | {
      readonly kind: 'postgres';
      /** The URL as given, password included: for the driver only, never for a log. */
      readonly url: string;
      /** The URL with any password replaced, for messages. */
      readonly display: string;
    }
  | { readonly kind: 'sqlite'; readonly path: string; readonly display: string };

export type ParsedSource =
  { readonly ok: true; readonly source: ImportSource } | { readonly ok: false; readonly message: string };

const USAGE = '--from takes postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE or sqlite:PATH';

/**
 * `--from` read into a source. A message about a bad value never repeats
 * it: a PostgreSQL URL may hold a password.
 */
export function parseImportSource(from: string): ParsedSource {
  if (from.startsWith('sqlite:')) {
    const path = from.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (path === '') return { ok: false, message: `${USAGE}: sqlite: needs the path of Synapse's database file` };
    return { ok: true, source: { kind: 'sqlite', path, display: `sqlite:${path}` } };
  }
  if (/^postgres(ql)?:\/\//i.test(from)) {
    let url: URL;
    try {
      url = new URL(from);
    } catch {
      return { ok: false, message: `${USAGE}: the PostgreSQL URL does not parse` };
    }
    if (url.pathname.length <= 1) return { ok: false, message: `${USAGE}: the PostgreSQL URL names no database` };
    return { ok: true, source: { kind: 'postgres', url: from, display: redactUrl(url) } };
  }
  return { ok: false, message: USAGE };
}

/** A URL fit for a log: its password, in the authority or as a query parameter, replaced by `***`. */
export function redactUrl(url: URL): string {
  const shown = new URL(url.href);
  if (shown.password !== '') shown.password = '***';
  for (const key of [...shown.searchParams.keys()]) {
    if (/pass/i.test(key)) shown.searchParams.set(key, '***');
  }
  return shown.href;
}
