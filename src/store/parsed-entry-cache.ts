import type { LoadedPushRules } from './push-store.js';

type Lookup = LoadedPushRules['lookup'];

interface Entry {
  readonly version: number;
  /** The stored text the lookup was parsed from: the entry is used only for this very text. */
  readonly contentJson: string;
  readonly defaultsRevision: string | undefined;
  readonly lookup: Lookup;
}

/**
 * The parsed push-rules entries of recently read users, so that reading the
 * same stored ruleset again costs a string comparison instead of a
 * `JSON.parse` of the whole ruleset (the largest part of a single-rule read
 * that is ours). An entry is used only when the document read now has the
 * same version and byte-for-byte the same text, so it can never answer with
 * anything but what the store holds; it saves CPU, never a read.
 *
 * Bounded by the summed length of the texts held (the parsed values take a
 * few times that), least recently used out first; a text longer than a
 * sixteenth of the bound is not kept, so a few huge rulesets cannot push
 * out everyone else. 0 turns it off. Parsed values are shared between
 * requests: the domain never mutates what it is given.
 */
export class ParsedEntryCache {
  readonly #maxChars: number;
  readonly #entries = new Map<string, Entry>();
  #chars = 0;

  constructor(maxChars: number) {
    this.#maxChars = maxChars;
  }

  get size(): number {
    return this.#entries.size;
  }

  /**
   * The lookup parsed from exactly this stored text, or `parse(text)`, kept
   * for next time unless `keep` is false (a load for a write: the write
   * changes the version, so its parse would never be used again).
   */
  lookup(
    userId: string,
    version: number,
    contentJson: string,
    defaultsRevision: string | undefined,
    parse: () => Lookup,
    keep = true,
  ): Lookup {
    const cached = this.#entries.get(userId);
    if (
      cached !== undefined &&
      cached.version === version &&
      cached.defaultsRevision === defaultsRevision &&
      cached.contentJson === contentJson
    ) {
      this.#entries.delete(userId);
      this.#entries.set(userId, cached);
      return cached.lookup;
    }
    const lookup = parse();
    this.#remove(userId);
    if (keep && contentJson.length * 16 <= this.#maxChars) {
      this.#entries.set(userId, { version, contentJson, defaultsRevision, lookup });
      this.#chars += contentJson.length;
      this.#evict();
    }
    return lookup;
  }

  /** Drops the user's entry: their stored text has just changed. */
  forget(userId: string): void {
    this.#remove(userId);
  }

  #remove(userId: string): void {
    const entry = this.#entries.get(userId);
    if (entry === undefined) return;
    this.#entries.delete(userId);
    this.#chars -= entry.contentJson.length;
  }

  #evict(): void {
    while (this.#chars > this.#maxChars) {
      const oldest = this.#entries.keys().next();
      if (oldest.done === true) return;
      this.#remove(oldest.value);
    }
  }
}
