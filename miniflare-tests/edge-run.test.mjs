// The edge entrypoints' rules that need no workerd (durable/js/edge-run.mjs), in Node: the routes
// a run's HOST lets through (the guest cannot reach HOST itself: QuickJS has no binding) and a
// build's, and
// the exit event a run gets when its isolate dies first (production's limits.cpuMs and 128 MB,
// which wrangler dev does not enforce on a dynamic worker), which runs a standby may serve, and
// that an edge module read from the page's assets is refused unless it is this build's
// (assets.mjs's checkedText, over a real Response; the deps builder is read so).

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, test } from "node:test";
import { checkedText } from "../durable/js/assets.mjs";
import { STANDBY_MAX_AGE_MS, endingWithExit, isFresh, isRunRoute, standbyFits } from "../durable/js/edge-run.mjs";

describe("a run's HOST reaches only its run token's routes", () => {
  test("the five routes, by method and path, and nothing else", () => {
    const body = "a".repeat(64);
    const routes = [["POST", "/egress"], ["POST", "/mcps-rpc"], ["PUT", `/workspace/bodies/${body}`], ["POST", "/workspace/commit"], ["PUT", "/files/r_1/out/plot.png"]];
    for (const [method, path] of routes) {
      assert.ok(isRunRoute(method, path), `${method} ${path}`);
    }
    for (const [method, path] of [
      ["GET", "/egress"],
      ["POST", "/egress/x"],
      ["POST", "/admin/tenants"],
      ["GET", "/session"],
      ["POST", "/mcp"],
      ["GET", `/workspace/bodies/${body}`],
      ["PUT", `/workspace/bodies/${body.toUpperCase()}`],
      ["PUT", "/workspace/bodies/abc"],
      ["POST", "/workspace/commit/"],
      ["POST", "/workspace/upload"],
      ["POST", "/session/default/workspace/commit"],
      ["GET", "/files/r_1/out/plot.png"],
      ["PUT", "/files/r_1/tmp/x"],
      ["PUT", "/files/r_1/out/"],
    ]) {
      assert.equal(isRunRoute(method, path), false, `${method} ${path}`);
    }
  });
});

describe("a build's HOST reaches only its package sources", () => {
  test("GET /registry, and none of a run's routes", () => {
    assert.ok(isRunRoute("GET", "/registry", { build: true }));
    assert.equal(isRunRoute("GET", "/registry"), false, "a run never fetches packages");
    for (const [method, path] of [
      ["POST", "/registry"],
      ["GET", "/registry/x"],
      ["POST", "/capsule/presign"],
      ["PUT", "/capsule/upload"],
      ["POST", "/capsule/finalize"],
      ["POST", "/egress"],
      ["POST", "/workspace/commit"],
    ]) {
      assert.equal(isRunRoute(method, path, { build: true }), false, `${method} ${path}`);
    }
  });
});

const lines = (...events) => events.map((e) => `${JSON.stringify(e)}\n`).join("");
/** A stream of `text` in chunks of 7 bytes (lines split across chunks), then `end`: "close" or an error. */
function stream(text, end) {
  const bytes = new TextEncoder().encode(text);
  let at = 0;
  return new ReadableStream({
    pull(controller) {
      if (at < bytes.length) return controller.enqueue(bytes.slice(at, (at += 7)));
      end === "close" ? controller.close() : controller.error(end);
    },
  });
}
const read = async (events) => (await new Response(events).text()).trim().split("\n").map((line) => JSON.parse(line));

describe("a run whose isolate dies still ends with an exit event", () => {
  const output = { runId: "r_1", seq: 0, type: "stdout", data: "a line\nand {\"type\":\"exit\"}" };

  test("a stream that errors before its exit ends RuntimeCrashed, numbered next", async () => {
    const got = await read(endingWithExit(stream(lines(output), new Error("isolate died")), { runId: "r_1", started: Date.now(), timeoutMs: 60_000 }));
    assert.deepEqual(got[0], output);
    assert.equal(got.length, 2);
    assert.equal(got[1].type, "exit");
    assert.equal(got[1].seq, 1);
    assert.equal(got[1].exitCode, 137);
    assert.equal(got[1].error.name, "RuntimeCrashed");
    assert.match(got[1].error.message, /died after \d+ ms.*Use less memory or CPU/);
  });

  test("a line the isolate died in the middle of is dropped: the exit after it stays whole, and the events before it too", async () => {
    const cut = lines(output, { runId: "r_1", seq: 1, type: "stdout", data: "x".repeat(40) }).slice(0, -20);
    const got = await read(endingWithExit(stream(cut, new Error("isolate died")), { runId: "r_1", started: Date.now(), timeoutMs: 60_000 }));
    assert.deepEqual(got[0], output);
    assert.equal(got.length, 2);
    assert.deepEqual([got[1].type, got[1].seq, got[1].error.name], ["exit", 1, "RuntimeCrashed"]);
  });

  test("one that ends with no exit after its timeout ends Timeout", async () => {
    const got = await read(endingWithExit(stream(lines(output), "close"), { runId: "r_1", started: Date.now() - 2000, timeoutMs: 1000 }));
    assert.equal(got.at(-1).error.name, "Timeout");
    assert.equal(got.at(-1).exitCode, 124);
    assert.ok(got.at(-1).usage.wallMs >= 2000);
  });

  test("one that sent its exit is passed on as it is", async () => {
    const exit = { runId: "r_1", seq: 1, type: "exit", exitCode: 0, usage: { wallMs: 5, memPeakMb: 1 } };
    const got = await read(endingWithExit(stream(lines(output, exit), "close"), { runId: "r_1", started: 0, timeoutMs: 1 }));
    assert.deepEqual(got, [output, exit]);
  });

  test("cancelling it cancels the runner's stream (the relay session stopped the run)", async () => {
    let cancelled = null;
    const source = new ReadableStream({ pull() {}, cancel: (reason) => void (cancelled = reason) });
    await endingWithExit(source, { runId: "r_1", started: Date.now(), timeoutMs: 1000 }).cancel("stopped");
    assert.equal(cancelled, "stopped");
  });
});

describe("a standby serves a run only while young and made for the run's CPU limit", () => {
  const madeAt = 1_000_000;
  test("young: from when it was made to just before STANDBY_MAX_AGE_MS; never when the clock reads before it was made", () => {
    for (const age of [0, 1, STANDBY_MAX_AGE_MS - 1]) assert.ok(isFresh({ madeAt }, madeAt + age), `${age}`);
    for (const age of [STANDBY_MAX_AGE_MS, STANDBY_MAX_AGE_MS + 1, 24 * 3600_000, -1, NaN]) assert.ok(!isFresh({ madeAt }, madeAt + age), `${age}`);
    assert.ok(!isFresh({}, madeAt), "one with no time made is never young");
  });

  test("fits a run whose worker needs the same CPU limit, no other", () => {
    const standby = { madeAt, cpuMs: 61_000 };
    assert.ok(standbyFits(standby, { cpuMs: 61_000, now: madeAt + 10 }));
    for (const cpuMs of [60_999, 61_001, 3_000, undefined, "61000"]) assert.ok(!standbyFits(standby, { cpuMs, now: madeAt + 10 }), `${cpuMs}`);
    assert.ok(!standbyFits(standby, { cpuMs: 61_000, now: madeAt + STANDBY_MAX_AGE_MS }), "stale");
  });
});

describe("an edge module read from the page's assets is this build's or refused", () => {
  const text = "export default {};\n";
  const integrity = `sha384-${createHash("sha384").update(text).digest("base64")}`;
  // The ASSETS binding's shape: fetch(URL) -> Response; `served` by path.
  const assets = (served) => ({ fetch: async (url) => (url.pathname in served ? new Response(served[url.pathname]) : new Response("", { status: 404 })) });

  test("the listed bytes are read as text", async () => {
    assert.equal(await checkedText(assets({ "/edge/builder.mjs": text }), { url: "edge/builder.mjs", integrity }), text);
  });

  test("other bytes (another build's, or damaged), or none, are refused naming the asset and what to do", async () => {
    for (const other of [text.replace("{}", "{ x: 1 }"), `${text} `, ""]) {
      await assert.rejects(checkedText(assets({ "/edge/builder.mjs": other }), { url: "edge/builder.mjs", integrity }), /edge\/builder\.mjs is sha384-.*not sha384-.*deploy the page's assets and the Worker from one build/);
    }
    await assert.rejects(checkedText(assets({}), { url: "edge/builder.mjs", integrity }), /answered 404: is the page built\?/);
  });
});
