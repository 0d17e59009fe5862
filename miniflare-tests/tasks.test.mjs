// The tasks extension end to end, over raw 2026-07-28 HTTP with a real executor tab: a client
// that declares io.modelcontextprotocol/tasks gets a task for run_js at once, polls it while
// the run prints (seeing the output so far), and finds the result inlined when it completes;
// nothing holds a connection meanwhile. A long task is cancelled; a client that did not
// declare the extension gets a plain result.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { attachedExecutor } from "./lib/attached.mjs";
import { modernCall } from "./lib/mcp-http.mjs";

const TASKS = { "io.modelcontextprotocol/tasks": {} };
const declaring = { "io.modelcontextprotocol/clientCapabilities": { extensions: TASKS } };

let attached;
let key;

before(async () => {
  attached = await attachedExecutor("tasks", { queue: { attachWaitMs: 2000 } });
  ({ key } = attached);
});
after(() => attached?.close());

const call = (method, params) => modernCall(key, method, { ...params, _meta: declaring });

async function pollUntil(taskId, done, timeoutMs = 30_000) {
  const seen = [];
  const end = Date.now() + timeoutMs;
  for (;;) {
    const { message } = await call("tasks/get", { taskId });
    seen.push(message.result);
    if (done(message.result)) return seen;
    if (Date.now() > end) throw new Error(`task ${taskId}: ${JSON.stringify(seen.at(-1))}`);
    await new Promise((r) => setTimeout(r, message.result.pollIntervalMs ?? 200));
  }
}

describe("tasks", () => {
  test("run_js becomes a task; polling shows its output so far, then the result", async () => {
    const code = `console.log("first"); await new Promise((r) => setTimeout(r, 2500)); console.log("second");`;
    const started = Date.now();
    const { status, message } = await call("tools/call", { name: "run_js", arguments: { code } });
    assert.equal(status, 200);
    assert.ok(Date.now() - started < 2000, "the handle comes before the run ends");
    const task = message.result;
    assert.equal(task.resultType, "task");
    assert.match(task.taskId, /^task_[0-9a-f]{32}$/);
    assert.equal(task.status, "working");
    assert.ok(!("result" in task));
    const seen = await pollUntil(task.taskId, (t) => t.status !== "working");
    const midway = seen.find((t) => t.status === "working" && t._meta?.["dev.relay-edge/output"]?.stdout === "first\n");
    assert.ok(midway, `a poll saw the output so far: ${JSON.stringify(seen.map((t) => t.statusMessage))}`);
    assert.match(midway.statusMessage, /running in the executor tab/);
    const done = seen.at(-1);
    assert.equal(done.status, "completed");
    assert.equal(done.result.structuredContent.stdout, "first\nsecond\n");
    assert.equal(done.result.isError, false);
    const again = await call("tasks/get", { taskId: task.taskId });
    assert.deepEqual(again.message.result.result, done.result, "the result stays readable");
  });

  test("a tool error is a completed task with isError", async () => {
    const { message } = await call("tools/call", { name: "run_py", arguments: { code: "raise SystemExit(3)" } });
    const [done] = (await pollUntil(message.result.taskId, (t) => t.status !== "working")).slice(-1);
    assert.equal(done.status, "completed");
    assert.equal(done.result.isError, true);
    assert.equal(done.result.structuredContent.exitCode, 3);
  });

  test("a cancelled task ends cancelled, and its tab moves on", async () => {
    const { message } = await call("tools/call", { name: "run_js", arguments: { code: "await new Promise(() => setInterval(() => {}, 1000))" } });
    const { taskId } = message.result;
    await pollUntil(taskId, (t) => /running/.test(t.statusMessage ?? ""));
    const ack = await call("tasks/cancel", { taskId });
    assert.equal(ack.message.result.resultType, "complete");
    assert.ok(!("status" in ack.message.result));
    const [ended] = (await pollUntil(taskId, (t) => t.status !== "working")).slice(-1);
    assert.equal(ended.status, "cancelled");
    const next = await modernCall(key, "tools/call", { name: "run_js", arguments: { code: "console.log('after')" } });
    assert.equal(next.message.result.structuredContent.stdout, "after\n", "no task: a plain result, and the tab is free");
  });

  test("tasks/* need the extension declared, and a known task id", async () => {
    const undeclared = await modernCall(key, "tasks/get", { taskId: "task_x" });
    assert.equal(undeclared.status, 400);
    assert.equal(undeclared.message.error.code, -32021);
    const unknown = await call("tasks/get", { taskId: "task_nope" });
    assert.equal(unknown.message.error.code, -32602);
  });
});
