// node:fs with the globSync the conformance bundle imports (see preload.mjs).
export * from 'node:fs';
export { default } from 'node:fs';

export function globSync() {
  throw new Error('globSync needs Node 22 (only the conformance tier-check command uses it)');
}
