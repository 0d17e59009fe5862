// The executor protocol itself, with this test playing the tab: attach, keep the tab's lease
// (pings on its lease socket), read `capsule` commands from the SSE stream, and post NDJSON
// result batches (or send them on a results socket). Retried batches are applied once; events
// for unknown or finished runs, or past a gap (which ends the run), are refused without
// holding back the others. A tab that stops renewing its lease is dropped.

import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, describe, test } from "node:test";
import { connectClient, readRelaySession } from "./lib/mcp-client.mjs";
import {
  LEGACY,
  initialize,
  legacyHeaders,
  mcpUrl,
  modernBody,
  modernCall,
  modernHeaders,
  parseSse,
  readUntil,
  sseEvents,
} from "./lib/mcp-http.mjs";
import { BASE, attach, createTenant, holdLease } from "./lib/relay.mjs";

const SESSION = "played-tab";
let key;
let token;
let commands;
let client;
let tabId;
let lease;

before(async () => {
  ({ key } = await createTenant("backchannel"));
  ({ attachToken: token } = await attach(key, SESSION));
  const events = await fetch(`${BASE}/session/${SESSION}/events`, { headers: bearer(token) });
  assert.equal(events.headers.get("content-type"), "text/event-stream");
  commands = sseEvents(events.body);
  const hello = (await commands.next()).value;
  assert.equal(hello.event, "hello");
  tabId = hello.data.tabId;
  assert.equal(hello.data.leaseMs, 10_000, "how long the tab's lease lasts unrenewed");
  lease = await holdLease(SESSION, token, tabId, hello.data.leaseMs);
  // Then the roster of the relay session's tabs: this one, which runs next.
  assert.deepEqual((await commands.next()).value, { event: "tabs", data: { count: 1, next: hello.data.tabId } });
  client = await connectClient(key, SESSION);
});

after(async () => {
  lease?.stop();
  await commands?.return();
  await client?.close();
});

const bearer = (t) => ({ authorization: `Bearer ${t}` });

/** Calls run_js and waits for its `capsule` command; returns the run id and the pending result. */
async function startRun(code) {
  const result = client.callTool({ name: "run_js", arguments: { code } });
  const { value } = await commands.next();
  assert.equal(value.event, "capsule");
  assert.equal(value.data.manifestUrl, `/capsules/${value.data.hash}/capsule.json`);
  return { runId: value.data.runId, runToken: value.data.runToken, result };
}

function post(lines, t = token) {
  return fetch(`${BASE}/session/${SESSION}/result`, {
    method: "POST",
    headers: { ...bearer(t), "content-type": "application/x-ndjson" },
    body: lines.map((l) => (typeof l === "string" ? l : JSON.stringify(l))).join("\n") + "\n",
  });
}

const exit = (runId, seq, exitCode = 0) => ({ runId, seq, type: "exit", exitCode, usage: { wallMs: 1, memPeakMb: 1 } });

test("a batch sent twice is applied once", async () => {
  const { runId, result } = await startRun("console.log('hi')");
  const batch = [
    { runId, seq: 0, type: "progress", phase: "received" },
    { runId, seq: 1, type: "stdout", data: "hi\n" },
    exit(runId, 2),
  ];
  let res = await post(batch);
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { applied: 3, duplicates: 0, refused: [] });
  res = await post(batch);
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { applied: 0, duplicates: 3, refused: [] });
  const { structuredContent } = await result;
  assert.equal(structuredContent.stdout, "hi\n");
  assert.equal(structuredContent.exitCode, 0);

  res = await post([{ runId, seq: 3, type: "stdout", data: "late\n" }]);
  assert.equal(res.status, 409);
  const refusal = await res.json();
  assert.equal(refusal.error.name, "EventsRefused");
  assert.match(refusal.refused[0].reason, /already ended/);
});

test("a run's mebibyte of output reaches the client in SSE events under 1 MB each", async () => {
  // The official Python SDK reads at most 1 MiB per SSE event by default.
  const stdout = `${"a".repeat(1023)}\n`.repeat(1024); // the default output cap, 1 MiB
  const params = { name: "run_js", arguments: { code: "big()" }, _meta: { "io.modelcontextprotocol/logLevel": "info" } };
  const answer = modernCall(key, "tools/call", params, { session: SESSION });
  const { value } = await commands.next();
  const { runId } = value.data;
  const res = await post([{ runId, seq: 0, type: "progress", phase: "received" }, { runId, seq: 1, type: "stdout", data: stdout }, exit(runId, 2)]);
  assert.equal(res.status, 200);
  const { text, events, message } = await answer;
  const sizes = text.split("\n").filter((line) => line.startsWith("data:")).map((line) => Buffer.byteLength(line));
  assert.ok(Math.max(...sizes) < 1_000_000, `SSE data lines of ${sizes.join(", ")} bytes`);
  const logged = events.filter((e) => e.method === "notifications/message").map((e) => e.params.data);
  assert.ok(logged.length > 1, "the output went as several log events");
  assert.equal(logged.join(""), stdout, "and all of it, in order");
  const { structuredContent, content } = message.result;
  assert.deepEqual(structuredContent.truncated, { stdout: stdout.length });
  assert.ok(stdout.startsWith(structuredContent.stdout) && structuredContent.stdout.length > 0);
  assert.match(content[0].text, /bytes are not shown/);
});

test("the token a capsule comes with reads capsule files and cannot act as a tab", async () => {
  const result = client.callTool({ name: "run_js", arguments: { code: "console.log('scoped')" } });
  const { value } = await commands.next();
  const filesToken = value.data.token;
  assert.equal((await fetch(`${BASE}${value.data.manifestUrl}`, { headers: bearer(filesToken) })).status, 200);
  assert.equal((await fetch(`${BASE}${value.data.manifestUrl}`)).status, 401, "no token, no file");
  assert.equal((await fetch(`${BASE}/session/${SESSION}/events`, { headers: bearer(filesToken) })).status, 401);
  assert.equal((await post([exit(value.data.runId, 0)], filesToken)).status, 401);
  assert.equal((await post([exit(value.data.runId, 0)])).status, 200);
  await result;
});

test("an attach token refreshes into a new one; a capsule-files token does not", async () => {
  const res = await fetch(`${BASE}/session/${SESSION}/refresh`, { method: "POST", headers: bearer(token) });
  assert.equal(res.status, 200);
  const grant = await res.json();
  assert.equal(grant.sessionId, SESSION);
  assert.ok(grant.expiresAt > Date.now() + 4 * 60_000);
  assert.notEqual(grant.attachToken, token);
  assert.equal((await post([], grant.attachToken)).status, 200, "the new token works");
  const result = client.callTool({ name: "run_js", arguments: { code: "console.log('refresh')" } });
  const { value } = await commands.next();
  const refused = await fetch(`${BASE}/session/${SESSION}/refresh`, { method: "POST", headers: bearer(value.data.token) });
  assert.equal(refused.status, 401);
  await post([exit(value.data.runId, 0)]);
  await result;
});

test("tokens are taken only from the Authorization header, never from the URL", async () => {
  for (const [path, method] of [["events", "GET"], ["result", "POST"], ["refresh", "POST"]]) {
    const res = await fetch(`${BASE}/session/${SESSION}/${path}?token=${token}`, { method, body: method === "POST" ? "" : undefined });
    assert.equal(res.status, 401, path);
    assert.match((await res.json()).error.message, /Authorization: Bearer/);
  }
});

/** Opens this tab's results socket with `protocols`; resolves once open. */
async function openSocket(protocols = ["relay-results", `bearer.${token}`], tab = tabId) {
  const ws = new WebSocket(`${BASE.replace(/^http/, "ws")}/session/${SESSION}/results?tab=${tab}`, protocols);
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = () => reject(new Error("the results socket did not open"));
  });
  // Replies to batches, and copies of run commands (framed as on the SSE stream).
  const queues = { reply: inbox(), copy: inbox() };
  ws.onmessage = ({ data }) => (data.startsWith("event:") ? queues.copy.put(data) : queues.reply.put(JSON.parse(data)));
  return { ws, reply: queues.reply.take, copy: queues.copy.take };
}

/** Messages in arrival order: `take()` resolves with the next one. */
function inbox() {
  const items = [];
  const waiting = [];
  return {
    put: (item) => (waiting.length ? waiting.shift()(item) : items.push(item)),
    take: () => (items.length ? Promise.resolve(items.shift()) : new Promise((resolve) => waiting.push(resolve))),
  };
}

/** The status and body, or the subprotocol of a 101, of a WebSocket upgrade of `path`. */
function upgrade(path, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = request(`${BASE}${path}`, {
      headers: { connection: "Upgrade", upgrade: "websocket", "sec-websocket-version": "13", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", ...headers },
    });
    req.on("upgrade", (res, socket) => {
      socket.destroy();
      resolve({ status: 101, protocol: res.headers["sec-websocket-protocol"] });
    });
    req.on("response", async (res) => {
      let text = "";
      for await (const chunk of res) text += chunk;
      resolve({ status: res.statusCode, body: JSON.parse(text) });
    });
    req.on("error", reject);
    req.end();
  });
}

test("a results socket takes batches and answers each as its POST would, in order", async () => {
  const { ws, reply, copy } = await openSocket();
  assert.equal(ws.protocol, "relay-results");
  try {
    const { runId, result } = await startRun("console.log('socket')");
    // The run's command came on the stream, and a copy of it, framed the same, on the socket.
    const copied = await copy();
    assert.match(copied, /^event: capsule\ndata: \{.*\}\n\n$/);
    assert.equal(JSON.parse(copied.split("\n")[1].slice("data: ".length)).runId, runId);
    const ndjson = (...lines) => lines.map((l) => JSON.stringify(l)).join("\n");
    const first = ndjson({ runId, seq: 0, type: "progress", phase: "received" }, { runId, seq: 1, type: "stdout", data: "socket\n" });
    ws.send(`1\n${first}`);
    ws.send(`2\n${first}\n${ndjson(exit(runId, 2))}`); // the first batch's lines again, as the page pipelines
    assert.deepEqual(await reply(), { id: 1, status: 200, body: { applied: 2, duplicates: 0, refused: [] } });
    assert.deepEqual(await reply(), { id: 2, status: 200, body: { applied: 1, duplicates: 2, refused: [] } });
    assert.equal((await result).structuredContent.stdout, "socket\n");

    ws.send(`3\n${ndjson({ runId, seq: 3, type: "stdout", data: "late\n" })}`);
    const late = await reply();
    assert.deepEqual([late.id, late.status, late.body.error.name], [3, 409, "EventsRefused"]);
    ws.send("4\n{not json");
    const bad = await reply();
    assert.deepEqual([bad.id, bad.status, bad.body.error.name], [4, 400, "ValidationError"]);
    assert.match(bad.body.error.message, /line 1/);
    // Over the POST route's 4 MiB body limit: refused alike, and the socket takes the next one.
    ws.send(`5\n${"x".repeat(4 * 1024 * 1024 + 1)}`);
    const large = await reply();
    assert.deepEqual([large.id, large.status, large.body.error.name], [5, 413, "PayloadTooLarge"]);
    assert.match(large.body.error.message, /4194304 bytes.*smaller batches/);
    ws.send("no id here");
    const unnumbered = await reply();
    assert.deepEqual([unnumbered.id, unnumbered.status], [0, 400]);
    assert.match(unnumbered.body.error.message, /batch id and a newline/);
  } finally {
    ws.close();
  }
});

test("a results socket opens only as a WebSocket, with the token among its subprotocols, for an attached tab", async () => {
  const path = `/session/${SESSION}/results?tab=${tabId}`;
  const plain = await fetch(`${BASE}${path}`, { headers: bearer(token) });
  assert.equal(plain.status, 426);
  assert.match((await plain.json()).error.message, /WebSocket.*POST batches/);

  const refused = async ([at, headers], status, pattern, what) => {
    const res = await upgrade(at, headers);
    assert.equal(res.status, status, what);
    assert.match(res.body.error.message, pattern, what);
  };
  const offer = (t) => ({ "sec-websocket-protocol": `relay-results, bearer.${t}` });
  await refused([path, bearer(token)], 401, /subprotocols `relay-results` and `bearer.<attachToken>`/, "Authorization is not read here");
  await refused([`${path}&token=${token}`, {}], 401, /subprotocols/, "nor a token in the URL");
  await refused([path, { "sec-websocket-protocol": `bearer.${token}` }], 401, /subprotocols/, "the protocol must be offered too");
  await refused([path, offer("not-a-token")], 401, /./, "a bad token");
  const other = await createTenant("backchannel-socket");
  await refused([path, offer((await attach(other.key, "elsewhere")).attachToken)], 401, /./, "another relay session's token");
  await refused([`/session/${SESSION}/results`, offer(token)], 400, /\?tab=/, "no tab");
  await refused([`/session/${SESSION}/results?tab=tab_000000000000`, offer(token)], 400, /attached/, "a tab not attached");
  assert.deepEqual(await upgrade(path, offer(token)), { status: 101, protocol: "relay-results" });
});

test("events for an unknown run are refused with 404", async () => {
  const res = await post([{ runId: "r_0000000000000000", seq: 0, type: "stdout", data: "x" }]);
  assert.equal(res.status, 404);
  assert.equal((await res.json()).error.name, "UnknownRun");
});

test("a refused event does not hold back the other runs' events in its batch", async () => {
  const previous = await startRun("console.log('one')");
  await post([exit(previous.runId, 0)]);
  await previous.result;
  const { runId, result } = await startRun("console.log('two')");
  const res = await post([
    { runId: previous.runId, seq: 1, type: "stdout", data: "too late\n" },
    { runId, seq: 0, type: "progress", phase: "received" },
    { runId, seq: 1, type: "stdout", data: "two\n" },
    exit(runId, 2),
  ]);
  assert.equal(res.status, 409);
  const body = await res.json();
  assert.equal(body.applied, 3);
  assert.deepEqual(body.refused.map((r) => r.runId), [previous.runId]);
  assert.equal((await result).structuredContent.stdout, "two\n");
});

test("a run's /out file is published only from the tab the run is on", async () => {
  const { runId, runToken, result } = await startRun("console.log('out')");
  const put = (tab) =>
    fetch(`${BASE}/files/${runId}/out/a.txt`, { method: "PUT", headers: { ...bearer(runToken), ...(tab && { "x-relay-tab": tab }) }, body: "a" });
  // A tab taken for gone before it acknowledged the run may still run it: not its files.
  const stale = await put("tab_taken_for_gone");
  assert.equal(stale.status, 409);
  const refusal = (await stale.json()).error;
  assert.equal(refusal.name, "Conflict");
  assert.match(refusal.message, new RegExp(`went to tab ${tabId} after tab tab_taken_for_gone took it`));
  const published = await put(tabId);
  assert.equal(published.status, 201, await published.clone().text());
  assert.match((await published.json()).url, new RegExp(`/files/.+/${runId}/out/a\\.txt\\?exp=`));
  await post([exit(runId, 0)]);
  await result;
});

test("an event past a gap is refused and ends the run: its output was lost on the way", async () => {
  const { runId, result } = await startRun("console.log('gap')");
  const res = await post([{ runId, seq: 0, type: "progress", phase: "received" }, { runId, seq: 2, type: "stdout", data: "b" }]);
  assert.equal(res.status, 409);
  const { refused } = await res.json();
  assert.deepEqual([refused[0].code, refused[0].seq], ["gap", 2]);
  const { value: cancel } = await commands.next();
  assert.deepEqual([cancel.event, cancel.data.runId], ["cancel", runId]);
  const { structuredContent } = await result;
  assert.equal(structuredContent.error.name, "Internal");
  assert.match(structuredContent.error.message, /lost on the way/);
});

test("bad batches and bad tokens are refused and change nothing", async () => {
  let res = await post(["{not json"]);
  assert.equal(res.status, 400);
  assert.match((await res.json()).error.message, /line 1/);
  res = await post([{ runId: "r_x", seq: 0, type: "stdout", data: "x", extra: true }]);
  assert.equal(res.status, 400);
  res = await post([{ runId: "r_x", seq: 0, type: "stdout", data: "x" }], "not-a-token");
  assert.equal(res.status, 401);
  const other = await createTenant("backchannel-other");
  const { attachToken } = await attach(other.key, "elsewhere");
  res = await post([{ runId: "r_x", seq: 0, type: "stdout", data: "x" }], attachToken);
  assert.equal(res.status, 401, "a token for another relay session does not open this one");
});

test("a legacy client that loses its stream resumes it with Last-Event-ID and gets the rest and the answer", async () => {
  const { sessionId } = await initialize(key, { session: SESSION });
  const body = { jsonrpc: "2.0", id: 41, method: "tools/call", params: { name: "run_js", arguments: { code: "console.log('resumed')" } } };
  const lost = new AbortController();
  const res = await fetch(mcpUrl(SESSION), {
    method: "POST",
    headers: legacyHeaders(key, sessionId, LEGACY),
    body: JSON.stringify(body),
    signal: lost.signal,
  });
  // The stream opens with a priming event: an id (the run's) and a retry, no data.
  const opening = await readUntil(res, (text) => text.includes("\n\n"));
  const [eventId] = parseSse(opening).ids;
  assert.match(opening, /^id: r_[0-9a-f]{16}\nretry: \d+\ndata: \n\n/);
  const { value } = await commands.next();
  assert.equal(value.data.runId, eventId);
  lost.abort(); // the connection drops: for a legacy client that is not a cancellation

  const resume = (id, session = sessionId) =>
    fetch(mcpUrl(SESSION), { headers: { ...legacyHeaders(key, session, LEGACY), accept: "text/event-stream", "last-event-id": id } });
  const resumed = await resume(eventId);
  assert.equal(resumed.status, 200);
  assert.equal(resumed.headers.get("content-type"), "text/event-stream");
  const runId = value.data.runId;
  assert.equal((await post([{ runId, seq: 0, type: "stdout", data: "resumed\n" }, exit(runId, 1)])).status, 200);
  const { events } = parseSse(await resumed.text());
  const answer = events.find((e) => e.id === 41);
  assert.equal(answer.result.structuredContent.stdout, "resumed\n");
  assert.deepEqual(events.filter((e) => e.method === "notifications/message").map((e) => e.params.data), ["resumed\n"]);

  // Only that MCP session may resume it, and only while there is something to resume.
  const { sessionId: stranger } = await initialize(key, { session: SESSION });
  assert.equal((await resume(eventId, stranger)).status, 404);
  assert.equal((await resume("r_0000000000000000")).status, 404);
});

test("closing a 2026-07-28 stream cancels its run: that era has no resumption", async () => {
  const body = modernBody("tools/call", { name: "run_js", arguments: { code: "for (;;) {}" } });
  const closing = new AbortController();
  const res = await fetch(mcpUrl(SESSION), { method: "POST", headers: modernHeaders(key, body), body: JSON.stringify(body), signal: closing.signal });
  const { value } = await commands.next();
  const runId = value.data.runId;
  assert.equal((await post([{ runId, seq: 0, type: "progress", phase: "received" }])).status, 200);
  closing.abort();
  res.body.cancel().catch(() => {});
  // The tab is told to stop it, and its late exit is refused: the run ended as Cancelled.
  const { value: cancel } = await commands.next();
  assert.deepEqual([cancel.event, cancel.data.runId], ["cancel", runId]);
  const late = await post([exit(runId, 1)]);
  assert.equal(late.status, 409);
  assert.equal((await late.json()).refused[0].code, "ended");
});

test("a legacy client that resumes after its run ended gets the run's answer, output included", async () => {
  const { sessionId } = await initialize(key, { session: SESSION });
  const body = { jsonrpc: "2.0", id: 43, method: "tools/call", params: { name: "run_js", arguments: { code: "console.log(1)" } } };
  const lost = new AbortController();
  const res = await fetch(mcpUrl(SESSION), { method: "POST", headers: legacyHeaders(key, sessionId, LEGACY), body: JSON.stringify(body), signal: lost.signal });
  const [eventId] = parseSse(await readUntil(res, (text) => text.includes("\n\n"))).ids;
  const { value } = await commands.next();
  lost.abort();
  const runId = value.data.runId;
  // The run ends while no one holds its stream; its answer may even have been "sent" into the
  // dead one. The client comes back for it afterwards.
  assert.deepEqual(await (await post([{ runId, seq: 0, type: "stdout", data: "late reader\n" }, exit(runId, 1)])).json(), {
    applied: 2,
    duplicates: 0,
    refused: [],
  });
  const resumed = await fetch(mcpUrl(SESSION), {
    headers: { ...legacyHeaders(key, sessionId, LEGACY), accept: "text/event-stream", "last-event-id": eventId },
  });
  const { events } = parseSse(await resumed.text());
  const answer = events.find((e) => e.id === 43)?.result.structuredContent;
  assert.deepEqual([answer.exitCode, answer.stdout, answer.error], [0, "late reader\n", undefined]);
});

test("a tab's readiness report shows in relay://session, and a run sent while it loads is told why it waits", async () => {
  const report = (runtimes, tab = tabId) =>
    fetch(`${BASE}/session/${SESSION}/ready`, {
      method: "POST",
      headers: { ...bearer(token), "content-type": "application/json", "x-relay-tab": tab },
      body: typeof runtimes === "string" ? runtimes : JSON.stringify({ runtimes }),
    });
  const executor = async () => (await readRelaySession(client)).executor;

  let res = await report('{"runtimes": {"quickjs@0.32": "warm"}}');
  assert.equal(res.status, 400);
  assert.match((await res.json()).error.message, /"loading" \| "ready" \| "failed"/);
  res = await report({ "quickjs@0.32": "ready" }, "tab_not_attached");
  assert.equal(res.status, 400);
  assert.match((await res.json()).error.message, /x-relay-tab must name a tab attached/);

  res = await report({ "quickjs@0.32": "loading" });
  assert.equal(res.status, 204);
  assert.deepEqual((await executor()).runtimes, { "quickjs@0.32": "loading" });
  assert.equal((await executor()).warmingUp, true);

  const progress = [];
  const result = client.callTool({ name: "run_js", arguments: { code: "1" } }, undefined, {
    onprogress: (p) => progress.push(p.message),
  });
  const { value } = await commands.next();
  assert.equal(value.event, "capsule");
  assert.equal((await post([exit(value.data.runId, 0)])).status, 200);
  assert.equal((await result).structuredContent.exitCode, 0);
  assert.equal(progress[0], "warming-up (the executor tab is still loading quickjs@0.32 after attaching; the run starts when it is ready)");

  assert.equal((await report({ "quickjs@0.32": "ready" })).status, 204);
  assert.equal((await executor()).warmingUp, false);
});

describe("a tab's lease", () => {
  const LEASED = "played-lease";
  let leaseToken;
  let leaseCommands;
  let hello;
  let leaseClient;

  before(async () => {
    ({ attachToken: leaseToken } = await attach(key, LEASED));
    const events = await fetch(`${BASE}/session/${LEASED}/events`, { headers: bearer(leaseToken) });
    leaseCommands = sseEvents(events.body);
    hello = (await leaseCommands.next()).value.data;
    leaseClient = await connectClient(key, LEASED);
  });

  after(async () => {
    await leaseCommands?.return();
    await leaseClient?.close();
  });

  const tabIds = async () => (await readRelaySession(leaseClient)).executor.tabIds;

  test("a lease socket opens only as a WebSocket offering relay-lease and the token, for an attached tab", async () => {
    const path = `/session/${LEASED}/lease?tab=${hello.tabId}`;
    const plain = await fetch(`${BASE}${path}`, { headers: bearer(leaseToken) });
    assert.equal(plain.status, 426);
    assert.match((await plain.json()).error.message, /WebSocket.*POST \/session\/:id\/lease/);
    const offer = (protocol) => ({ "sec-websocket-protocol": `${protocol}, bearer.${leaseToken}` });
    const refused = await upgrade(path, offer("relay-results"));
    assert.equal(refused.status, 401, "the results socket's protocol does not open a lease socket");
    assert.match(refused.body.error.message, /subprotocols `relay-lease` and `bearer.<attachToken>`/);
    const unknown = await upgrade(`/session/${LEASED}/lease?tab=tab_000000000000`, offer("relay-lease"));
    assert.equal(unknown.status, 400);
    assert.match(unknown.body.error.message, /\?tab= must name a tab attached.*attaches again/);
    assert.deepEqual(await upgrade(path, offer("relay-lease")), { status: 101, protocol: "relay-lease" });
  });

  test("the runtime answers a lease socket's ping, it takes nothing else, and a POST renews the lease where no socket opens", async () => {
    const lease = await holdLease(LEASED, leaseToken, hello.tabId, hello.leaseMs);
    try {
      const pong = new Promise((resolve) => (lease.socket.onmessage = ({ data }) => resolve(data)));
      lease.socket.send("ping");
      assert.equal(await pong, "pong");
      const closed = new Promise((resolve) => (lease.socket.onclose = ({ code, reason }) => resolve([code, reason])));
      lease.socket.send("anything else");
      assert.deepEqual(await closed, [4400, "a lease socket takes only `ping`"]);
    } finally {
      lease.stop();
    }
    const renew = (tab) =>
      fetch(`${BASE}/session/${LEASED}/lease`, { method: "POST", headers: { ...bearer(leaseToken), "x-relay-tab": tab } });
    assert.equal((await renew(hello.tabId)).status, 204);
    const res = await renew("tab_000000000000");
    assert.equal(res.status, 400);
    assert.match((await res.json()).error.message, /x-relay-tab must name a tab attached/);
  });

  test("a tab that stops renewing its lease is dropped within it, though its stream and socket stay open", async () => {
    const lease = await holdLease(LEASED, leaseToken, hello.tabId, hello.leaseMs);
    const closed = new Promise((resolve) => (lease.socket.onclose = ({ code }) => resolve(code)));
    assert.deepEqual(await tabIds(), [hello.tabId]);
    await new Promise((resolve) => setTimeout(resolve, hello.leaseMs)); // renewed all along
    assert.deepEqual(await tabIds(), [hello.tabId], "a tab that renews its lease stays");
    const silent = Date.now();
    lease.silence(); // the socket stays open, and says nothing more
    for (;;) {
      if ((await tabIds()).length === 0) break;
      assert.ok(Date.now() - silent < hello.leaseMs + 15_000, "the silent tab is still listed");
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    console.log(`# a silent tab was dropped ${Date.now() - silent} ms after its last renewal`);
    assert.equal(await closed, 4410, "its lease socket is closed: attach again");
    for (;;) {
      const { done } = await leaseCommands.next();
      if (done) break; // and its command stream ended
    }
  });
});
