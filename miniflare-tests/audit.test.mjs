// The hash-chained audit against the built Worker over raw HTTP: calls with no tab attached
// still end (runs with NoExecutorAttached; a read, answered by the relay session itself, with
// ValidationError for a file that is not there) and are sealed onto the relay session's chain; relay://audit
// shows them with no secret; the exported records verify with `relay-capsule audit-verify`,
// and an edited or a deleted record is named by its seq.

import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { modernCall } from "./lib/mcp-http.mjs";
import { createTenant, relayCapsule } from "./lib/relay.mjs";

const SECRET_ENV = "sk_live_do_not_keep_4f9a2c7e1b";
let key;
let audit;

/** `relay-capsule audit-verify` on `records`: `{code, out}`, out being stdout or stderr. */
function auditVerify(records) {
  const input = records.map((r) => JSON.stringify(r)).join("\n");
  try {
    return { code: 0, out: relayCapsule(["audit-verify"], input) };
  } catch (e) {
    return { code: e.status, out: String(e.stderr) };
  }
}

before(async () => {
  ({ key } = await createTenant("audit", { queue: { attachWaitMs: 200 } }));
  const calls = [
    { name: "run_js", arguments: { code: "console.log(1)", env: { API_TOKEN: SECRET_ENV } } },
    { name: "run_py", arguments: { code: "print(2)", stdin: `Bearer ${SECRET_ENV}` } },
    { name: "read", arguments: { path: "/tmp/notes.txt" } },
  ];
  for (const params of calls) {
    const { status, message } = await modernCall(key, "tools/call", params);
    assert.equal(status, 200);
    assert.equal(message.result.isError, true);
  }
  const { status, message } = await modernCall(key, "resources/read", { uri: "relay://audit" });
  assert.equal(status, 200);
  const text = message.result.contents[0].text;
  assert.ok(!text.includes(key), "the tenant key is not in the audit");
  assert.ok(!text.includes(SECRET_ENV), "an env value passed in a call is not in the audit");
  audit = JSON.parse(text);
});

describe("relay://audit", () => {
  test("lists the resource next to relay://session", async () => {
    const { message } = await modernCall(key, "resources/list", {});
    assert.deepEqual(message.result.resources.map((r) => r.uri), ["relay://session", "relay://audit", "relay://workspace", "relay://contexts", "relay://usage"]);
  });

  test("three calls are three chained records with their tool and error name", () => {
    const { head, records } = audit;
    assert.equal(records.length, 3);
    assert.deepEqual(records.map((r) => r.seq), [0, 1, 2]);
    assert.deepEqual(records.map((r) => r.tool), ["run_js", "run_py", "read"]);
    assert.deepEqual(records.map((r) => r.errorName), ["NoExecutorAttached", "NoExecutorAttached", "ValidationError"]);
    for (const record of records) {
      assert.equal(record.kind, "tool_call");
      assert.equal(record.relaySession, "default");
      assert.match(record.chain, /^[0-9a-f]{64}$/);
    }
    assert.equal(records[0].prev, "0".repeat(64));
    assert.equal(records[1].prev, records[0].chain);
    assert.equal(records[2].prev, records[1].chain);
    assert.deepEqual(head, { seq: 2, chain: records[2].chain });
    assert.deepEqual(records[0].args.env, { API_TOKEN: "***" });
    assert.equal(records[0].args.code.bytes, "console.log(1)".length);
    assert.equal(records[1].args.stdin, "***");
    assert.equal(records[2].args.path, "/tmp/notes.txt");
  });

  test("the export verifies; an edited or a deleted record is named by its seq", () => {
    const { records } = audit;
    const ok = auditVerify(records);
    assert.equal(ok.code, 0, ok.out);
    assert.equal(ok.out.trim(), `ok: 3 records, head 2 ${records[2].chain}`);

    const edited = structuredClone(records);
    edited[1].errorName = null;
    const broken = auditVerify(edited);
    assert.equal(broken.code, 1);
    assert.match(broken.out, /broken at seq 1: .*edited/);

    const deleted = [records[0], records[2]];
    const gap = auditVerify(deleted);
    assert.equal(gap.code, 1);
    assert.match(gap.out, /broken at seq 1: .*deleted/);
  });
});
