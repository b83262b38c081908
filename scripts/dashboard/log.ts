/** check-dashboard's lines on stderr, told apart from the table it prints on stdout. */
export function log(message: string): void {
  process.stderr.write(`check-dashboard: ${message}\n`);
}
