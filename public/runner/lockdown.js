// What guest code may reach in this worker. Pyodide's `js` module hands Python the worker's
// global scope, so without this a run could call fetch() past the network policy, or write the
// Cache API entries later runs load their runtimes from. The loaders keep the references they
// need (`network`), taken before anything runs; the globals themselves are removed, on the
// global object and along its prototype chain, before the first run.

export const network = Object.freeze({ fetch: self.fetch.bind(self), caches: self.caches });

const SEALED = [
  "fetch",
  "XMLHttpRequest",
  "WebSocket",
  "WebTransport",
  "EventSource",
  "importScripts",
  "caches",
  "CacheStorage",
  "Cache",
  "indexedDB",
  "IDBFactory",
  "Worker",
  "SharedWorker",
  "BroadcastChannel",
];

export function lockdown() {
  for (const name of SEALED) {
    for (let scope = self; scope; scope = Object.getPrototypeOf(scope)) {
      if (Object.prototype.hasOwnProperty.call(scope, name)) delete scope[name];
    }
    // Writable, so a loader may lend a fetch of its own for a moment (runner/pyodide.js).
    Object.defineProperty(self, name, { value: undefined, writable: true, configurable: true });
  }
}
