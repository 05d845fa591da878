// Resolve hook of preload.mjs: "fs" imported by the conformance bundle is fs-node20.mjs.
import fs from 'node:fs';

const shim = new URL('./fs-node20.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && !('globSync' in fs) &&
      context.parentURL && context.parentURL.includes('/@modelcontextprotocol/conformance/')) {
    return { url: shim, shortCircuit: true };
  }
  return next(specifier, context);
}
