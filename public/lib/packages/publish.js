// The end of every npm or Python deps build, a tab's (lib/deps-build.js) or the edge's
// (durable/js/entry.mjs): an upload grant for the layer (POST /capsule/presign), the layer
// uploaded under it (PUT /capsule/upload, the grant as its bearer), and the build finalized
// (POST /capsule/finalize), which checks the layer and the proposal, signs the capsule, records
// the build for later identical calls, and answers with the `capsule` command's data. The
// server trusts none of it. No page or Worker globals here: the Worker's entry imports it.

import { sha256Hex } from "../bytes.js";

/**
 * @param layer the deps layer's zip (Uint8Array)
 * @param resolved the packages built, `name@version`
 * @param send (path, init) => Promise<Response>: a request of this Worker under the run's token
 *   (an `authorization` in init.headers takes its place), resolving only for 2xx answers
 * @param progress (phase, detail) => void
 * @returns {Promise<{sha256: string, announced: object}>} the layer's sha256 and the `capsule`
 *   command's data
 */
export async function publishLayer(layer, resolved, send, progress) {
  const claim = { id: "deps", sha256: await sha256Hex(layer), size: layer.length };
  const post = async (path, body) => {
    const res = await send(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    return res.json();
  };
  progress("upload", `${Math.round(layer.length / 1024)} KiB`);
  const { grants } = await post("/capsule/presign", { layers: [claim] });
  const [{ url, grant }] = grants;
  await send(url, { method: "PUT", headers: { authorization: `Bearer ${grant}` }, body: layer });
  progress("finalize", `${resolved.length} packages`);
  return { sha256: claim.sha256, announced: await post("/capsule/finalize", { layers: [claim], resolved }) };
}
