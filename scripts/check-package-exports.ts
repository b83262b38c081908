// Run after `npm run build`: imports every entry of package.json `exports`
// by the package's own name (Node resolves a package's self-reference
// through `exports`), so a broken path or a missing export fails CI.
import { access, readFile } from 'node:fs/promises';

interface PackageJson {
  readonly name: string;
  readonly exports?: Record<string, { readonly types?: string; readonly default?: string } | string>;
}

/** What each entry must export at run time. */
const EXPECTED: Record<string, readonly string[]> = {
  './client': ['PushRulesClient', 'PushRulesError', 'DEFAULT_QUEUE'],
};

const pkg = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8')) as PackageJson;
const problems: string[] = [];
for (const [entry, names] of Object.entries(EXPECTED)) {
  const target = pkg.exports?.[entry];
  if (target === undefined || typeof target === 'string' || target.types === undefined) {
    problems.push(`package.json exports has no ${entry} with types`);
    continue;
  }
  const types = target.types;
  await access(new URL(`../${types}`, import.meta.url)).catch(() =>
    problems.push(`${entry}: types file ${types} is missing`),
  );
  const specifier = `${pkg.name}/${entry.slice(2)}`;
  const loaded = (await import(specifier)) as Record<string, unknown>;
  for (const name of names) if (loaded[name] === undefined) problems.push(`${specifier} does not export ${name}`);
}
if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(`package exports ok: ${Object.keys(EXPECTED).join(', ')}`);
