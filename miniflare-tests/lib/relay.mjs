// The Worker under test: its URL (scripts/test.sh starts `wrangler dev` and exports RELAY_URL),
// the local secrets from .dev.vars, and helpers to create tenants and call /mcp.

import { readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const BASE = process.env.RELAY_URL ?? "http://127.0.0.1:8799";

/** The values of .dev.vars, which `wrangler dev` gives the Worker as secrets. */
export const devVars = Object.fromEntries(
  readFileSync(path.join(ROOT, ".dev.vars"), "utf8")
    .split("\n")
    .filter((line) => line.includes("="))
    .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1).trim()]),
);

/** Creates a tenant through the admin endpoint (of the Worker at `base`); returns `{key, tenant}`. */
export async function createTenant(name = "test", defaults = undefined, base = BASE) {
  const res = await fetch(`${base}/admin/tenants`, {
    method: "POST",
    headers: { authorization: `Bearer ${devVars.ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(defaults ? { name, defaults } : { name }),
  });
  if (res.status !== 201) throw new Error(`creating tenant: ${res.status} ${await res.text()}`);
  return res.json();
}

/** Changes tenant `id`'s name or defaults (`PATCH /admin/tenants/<id>`, a JSON merge patch): the raw response. */
export function patchTenant(id, patch, base = BASE) {
  return fetch(`${base}/admin/tenants/${id}`, {
    method: "PATCH",
    headers: { authorization: `Bearer ${devVars.ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(patch),
  });
}

/** Attaches a tab to relay session `session` of `key`'s tenant: `{sessionId, attachToken, expiresAt}`. */
export async function attach(key, session) {
  const res = await fetch(`${BASE}/session`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ session }),
  });
  if (res.status !== 200) throw new Error(`attaching: ${res.status} ${await res.text()}`);
  return res.json();
}

/**
 * Keeps the lease of a tab this test plays (tab `tabId` of relay session `session`, attach
 * token `token`) as the page's lease worker does: a `ping` on its lease socket every
 * `leaseMs / 5`. Resolves once the socket is open, with `{socket, silence(), stop()}`:
 * `silence` stops the pings and leaves the socket open, `stop` closes it too.
 */
export async function holdLease(session, token, tabId, leaseMs) {
  const url = `${BASE.replace(/^http/, "ws")}/session/${session}/lease?tab=${tabId}`;
  const socket = new WebSocket(url, ["relay-lease", `bearer.${token}`]);
  await new Promise((resolve, reject) => {
    socket.onopen = resolve;
    socket.onerror = () => reject(new Error("the lease socket did not open"));
  });
  const timer = setInterval(() => socket.send("ping"), leaseMs / 5);
  return {
    socket,
    silence: () => clearInterval(timer),
    stop() {
      clearInterval(timer);
      socket.close();
    },
  };
}

/** Runs the native `relay-capsule` CLI (built by scripts/test.sh, in CARGO_TARGET_DIR when set)
 * with `input` on stdin. */
export function relayCapsule(args, input) {
  const target = path.resolve(ROOT, process.env.CARGO_TARGET_DIR ?? "target");
  const bin = path.join(target, "debug/relay-capsule");
  return execFileSync(bin, args, { input, encoding: "utf8", stdio: ["pipe", "pipe", "pipe"] });
}

/** A run token (for /egress and /files) signed with the dev key: `ttl` seconds from now. */
export function mintRunToken({ tenant, session = "default", run, capsule, ttl = 300 }) {
  return relayCapsule(["run-token", devVars.CAPSULE_SIGNING_KEY, tenant, session, run, capsule, String(ttl)]);
}
