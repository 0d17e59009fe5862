// The runner test page (dist/test/runner-test.html, served over dist/public) in headless Chromium on a static server:
// the setup runner.test.mjs and workspace.test.mjs share. The page exposes the executor's own
// modules as window.relayTest.

import { buildAssets } from "../../scripts/build-assets.mjs";
import { launchBrowser } from "./browser.mjs";
import { startStaticServer } from "./static-server.mjs";

export const RUNTIMES = { js: "quickjs@0.32", py: "pyodide@314" };

/**
 * Builds the assets, serves them and launches Chromium with one browser context.
 * @returns {{outDir, server, browser, context, openPage(): Promise<Page>, close(): Promise<void>}}
 *   (outDir: dist/public, where the page's files are built)
 */
export async function startRunnerPages() {
  const { outDir, testDir } = await buildAssets({ log: () => {} });
  const server = await startStaticServer([testDir, outDir]);
  const browser = await launchBrowser();
  const context = await browser.newContext();
  return {
    outDir,
    server,
    browser,
    context,
    /** A new tab on the test page (in `inContext`), once window.relayTest exists. */
    async openPage(inContext = context) {
      const page = await inContext.newPage();
      page.on("pageerror", (err) => console.error(`page error: ${err.message}`));
      await page.goto(`${server.url}/runner-test.html`);
      await page.waitForFunction(() => window.relayTest);
      return page;
    },
    async close() {
      await browser.close();
      await server.close();
    },
  };
}

let runCount = 0;

/** A runner job for `code` as the entry file, with the given entry fields, limits and extras. */
export function runnerJob(language, code, { files = {}, entry = {}, limits = {}, ...extra } = {}) {
  const path = `/entry.${language}`;
  return {
    runId: `r_${++runCount}`,
    language,
    runtimeId: RUNTIMES[language],
    files: { [path.slice(1)]: code, ...files },
    entry: { path, argv: [], env: {}, cwd: "/", stdin: "", ...entry },
    limits: { timeoutMs: 30_000, memMb: 256, stdoutBytes: 1 << 20, ...limits },
    ...extra,
  };
}
