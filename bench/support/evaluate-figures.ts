/** How the evaluate part's report writes its figures (µs, ms, MB): one way for both its target checks and its markdown. */
export const us = (value: number) =>
  value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value >= 1 ? value.toFixed(2) : value.toFixed(3);
export const ms = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : '–');
export const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;
