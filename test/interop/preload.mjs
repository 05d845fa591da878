// Preload of every Node process the interop suite starts (node --import ./preload.mjs):
//
//  - Servers listen on loopback only: a listen(port) without a host (server-everything calls
//    app.listen(PORT)) binds 127.0.0.1, not every interface.
//  - The conformance CLI 0.1.16 loads on Node 20: its bundle imports globSync from "fs", a
//    Node 22 export that only its tier-check command uses (the server scenarios never call it).
//    The resolve hook in fs-hook.mjs hands that bundle fs-node20.mjs instead.
import net from 'node:net';
import { register } from 'node:module';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if ((typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]))) && typeof args[1] !== 'string') {
    args.splice(1, 0, '127.0.0.1');
  }
  return listen.apply(this, args);
};

register('./fs-hook.mjs', import.meta.url);
