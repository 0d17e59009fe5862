// The local server's own stores, read from wrangler dev's state beside RELAY_SERVER_LOG
// (scripts/with-server.sh): what a test checks is really there, or really gone; and the R2 of
// a server a test started itself, to change behind its back while it is stopped.

import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";

/** Every key `test` admits in the local KV (`kind` "kv") or R2 (`"r2"`). */
export function storedKeys(kind, test) {
  const found = [];
  for (const [db, table] of stores(path.dirname(process.env.RELAY_SERVER_LOG), kind, { readOnly: true })) {
    found.push(...db.prepare(`SELECT key FROM ${table}`).all().map((r) => r.key).filter(test));
    db.close();
  }
  return found;
}

/**
 * The local R2 of a server's `stateDir` (`--persist-to`), to read or (with the server stopped)
 * to write: its objects' table (`_mf_objects`: key, blob_id, custom_metadata, ...) and the
 * directory of their bodies (a file per blob_id). Close `db` when done.
 */
export function localR2(stateDir) {
  const [[db] = []] = stores(stateDir, "r2", { readOnly: false });
  const buckets = path.join(stateDir, "v3", "r2");
  const bucket = readdirSync(buckets).find((dir) => existsSync(path.join(buckets, dir, "blobs")));
  if (!db || !bucket) throw new Error(`no local R2 in ${stateDir}`);
  return { db, blobs: path.join(buckets, bucket, "blobs") };
}

/** `[db, table]` of each SQLite file of `kind`'s stores in `stateDir` that holds its table. */
function stores(stateDir, kind, options) {
  const state = path.join(stateDir, "v3", kind);
  const table = kind === "kv" ? "_mf_entries" : "_mf_objects";
  const found = [];
  for (const dir of existsSync(state) ? readdirSync(state) : []) {
    for (const file of readdirSync(path.join(state, dir)).filter((f) => f.endsWith(".sqlite") && f !== "metadata.sqlite")) {
      const db = new DatabaseSync(path.join(state, dir, file), options);
      if (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?").get(table)) found.push([db, table]);
      else db.close();
    }
  }
  return found;
}
