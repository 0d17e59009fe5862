// The search tool's engine (relay-core's, in policy.wasm) in a worker of the page's own origin.
// The engine is linear in the text, but a hard pattern over a full workspace can still take a
// minute, and the page's thread, which runs everything else of this tab, must never wait on it:
// lib/searcher.js gives up on a search that takes too long by terminating this worker.
// Messages: page -> {request, files: [[path, Uint8Array]]}; worker -> {value} | {error: {name, message}}

import { loadPolicy } from "./lib/policy.js";

self.onmessage = async ({ data: { request, files } }) => {
  try {
    const policy = await loadPolicy();
    self.postMessage({ value: policy.search(request, files) });
  } catch (err) {
    self.postMessage({ error: { name: err.name, message: err.message } });
  }
};
