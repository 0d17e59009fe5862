// The local server's own stores, read from wrangler dev's state beside RELAY_SERVER_LOG
// (scripts/with-server.sh): what a test checks is really there, or really gone.

import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";

/** Every key `test` admits in the local KV (`kind` "kv") or R2 (`"r2"`). */
export function storedKeys(kind, test) {
  const state = path.join(path.dirname(process.env.RELAY_SERVER_LOG), "v3", kind);
  const table = kind === "kv" ? "_mf_entries" : "_mf_objects";
  const found = [];
  for (const dir of existsSync(state) ? readdirSync(state) : []) {
    for (const file of readdirSync(path.join(state, dir)).filter((f) => f.endsWith(".sqlite") && f !== "metadata.sqlite")) {
      const db = new DatabaseSync(path.join(state, dir, file), { readOnly: true });
      if (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?").get(table)) {
        found.push(...db.prepare(`SELECT key FROM ${table}`).all().map((r) => r.key).filter(test));
      }
      db.close();
    }
  }
  return found;
}
