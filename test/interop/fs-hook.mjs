// Resolve hook of preload.mjs: "fs" imported by a conformance bundle (0.1.16, and 0.2.0 under its
// npm alias conformance-next) is fs-node20.mjs.
import fs from 'node:fs';

const shim = new URL('./fs-node20.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && !('globSync' in fs) &&
      context.parentURL && /\/(@modelcontextprotocol\/conformance|conformance-next)\//.test(context.parentURL)) {
    return { url: shim, shortCircuit: true };
  }
  return next(specifier, context);
}
