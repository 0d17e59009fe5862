// No page of the relay can be framed by another origin (issue 23: a framed consent page, its
// API key filled in from the tab's storage, was clicked through and a token stolen). A page on
// another origin frames every HTML page the assets serve (each .html of dist/public, under its
// own name and the one the assets answer it at), the OAuth consent page as /oauth/authorize
// sends a browser there, and a run's HTML file from /files; Chromium must refuse each. A frame
// of the attacker's own origin loads, so the test sees a refusal only where there is one.

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { readdirSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { launchBrowser } from "./lib/browser.mjs";
import { BASE, ROOT, createTenant, mintRunToken } from "./lib/relay.mjs";
import { startStaticServer } from "./lib/static-server.mjs";

const REFUSED = "chrome-error://chromewebdata/";
let browser;
let attacker;
let dir;

before(async () => {
  browser = await launchBrowser();
  dir = await mkdtemp(path.join(tmpdir(), "relay-framer-"));
  await writeFile(path.join(dir, "own.html"), "<p id=own>framed</p>");
  attacker = await startStaticServer(dir);
});
after(async () => {
  await browser?.close();
  await attacker?.close();
  await rm(dir, { recursive: true, force: true });
});

/** An authorization request of a freshly registered client, as an MCP client sends a person. */
async function authorizeQuery() {
  const redirect = "http://127.0.0.1:9/callback";
  const res = await fetch(`${BASE}/oauth/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ client_name: "framing", redirect_uris: [redirect] }),
  });
  const { client_id } = await res.json();
  const challenge = createHash("sha256").update(randomBytes(32).toString("base64url")).digest("base64url");
  const fields = { response_type: "code", client_id, redirect_uri: redirect, code_challenge: challenge, code_challenge_method: "S256", state: "s" };
  return new URLSearchParams(fields).toString();
}

/** A download URL (absolute) of an HTML file a run left in /out. */
async function runHtmlFile() {
  const { tenant } = await createTenant("framing");
  const token = mintRunToken({ tenant: tenant.id, run: "r_framing", capsule: "0".repeat(64) });
  const res = await fetch(`${BASE}/files/r_framing/out/page.html`, { method: "PUT", headers: { authorization: `Bearer ${token}` }, body: "<p id=file>run output</p>" });
  assert.equal(res.status, 201, await res.clone().text());
  return (await res.json()).url;
}

/** Where each frame of `urls` ended up once the attacker's page framed them all. */
async function frame(urls) {
  const frames = urls.map((url, i) => `<iframe id="f${i}" src="${url}"></iframe>`).join("\n");
  await writeFile(path.join(dir, "index.html"), `<!doctype html>${frames}`);
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(`${attacker.url}/`, { waitUntil: "load" });
    return await Promise.all(urls.map(async (_, i) => (await (await page.$(`#f${i}`)).contentFrame()).url()));
  } finally {
    await context.close();
  }
}

test("another origin cannot frame any page of the relay; its own frame loads", async () => {
  const html = readdirSync(path.join(ROOT, "dist/public")).filter((name) => name.endsWith(".html") && name !== "sandbox.html");
  assert.ok(html.includes("index.html") && html.includes("authorize.html"), html.join(" "));
  const query = await authorizeQuery();
  const pages = [
    ...html.flatMap((name) => [`/${name}`, name === "index.html" ? "/" : `/${name.slice(0, -".html".length)}`]),
    `/authorize?${query}`,
    `/authorize.html?${query}`,
    `/oauth/authorize?${query}`,
    await runHtmlFile(),
    "/sandbox.html",
  ].map((p) => new URL(p, BASE).href);
  const landed = await frame([...pages, `${attacker.url}/own.html`]);
  assert.equal(landed.at(-1), `${attacker.url}/own.html`, "a frame the browser allows loads, so a refusal shows");
  const framed = pages.filter((_, i) => landed[i] !== REFUSED);
  assert.deepEqual(framed, [], `framed by another origin: ${framed.join(", ")}`);
});

test("every page's answer says so itself: frame-ancestors and X-Frame-Options", async () => {
  const query = await authorizeQuery();
  for (const url of ["/", `/authorize?${query}`, await runHtmlFile()]) {
    const res = await fetch(new URL(url, BASE));
    assert.equal(res.status, 200, url);
    assert.match(res.headers.get("content-security-policy") ?? "", /frame-ancestors 'none'/, url);
    assert.equal(res.headers.get("x-frame-options"), "DENY", url);
    await res.arrayBuffer();
  }
  const sandbox = await fetch(`${BASE}/sandbox.html`);
  assert.equal(sandbox.headers.get("x-frame-options"), "SAMEORIGIN", "the one page the relay's own page frames");
  await sandbox.arrayBuffer();
});
