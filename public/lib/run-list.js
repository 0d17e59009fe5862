// The page's list of the runs this tab executed, for the person at the tab: tool, language,
// status, duration and exit code in one line that opens to what ran (the capsule's code, or a
// file tool's arguments, collapsed), the output as it streams and the /out files as download
// links, images with a thumbnail. The relay session's runs at the edge are listed too, once
// ended (the `ran` command: on attaching, the last ones; then each as it ends), marked "edge". Kept in localStorage per relay session (the last RUNS_KEPT
// runs, OUTPUT_KEPT characters of each stream and of the code), so a reload still shows them.
// Code and output are text from the agent and guest code: they only ever go into textContent.

const RUNS_KEPT = 20;
const OUTPUT_KEPT = 16 * 1024;
const SAVE_EVERY_MS = 1000;
const LANGUAGES = { js: "JavaScript", py: "Python" };
// Files shown with a thumbnail: the image types a run's result also returns as image content.
const IMAGE_EXTENSIONS = ["png", "jpg", "jpeg", "gif", "webp", "svg"];

export class RunList {
  /**
   * @param listEl the <ol> the runs go in, newest first
   * @param emptyEl what shows while there are none
   * @param storageKey where they are kept (one key per relay session)
   */
  constructor(listEl, emptyEl, storageKey) {
    this.listEl = listEl;
    this.emptyEl = emptyEl;
    this.storageKey = storageKey;
    this.saveTimer = null;
    this.onFinish = () => {}; // told when a run ends
    this.runs = load(storageKey);
    for (const run of [...this.runs].reverse()) this.listEl.prepend(render(run));
    this.showEmpty();
  }

  /**
   * Adds a run ({runId, tool, language?, target?}) as running; returns what reports on it:
   * code(text) once what runs is known, output(stream, text) as it comes, and
   * finish({exitCode, usage, error, files}).
   */
  start({ runId, tool, language, target }) {
    const run = { runId, tool, language, target, status: "running", startedAt: Date.now(), code: "", stdout: "", stderr: "", cut: 0, files: [] };
    let item = this.add(run);
    const update = () => {
      const fresh = render(run, item.querySelector("details")?.open, item.querySelector(".run-code")?.open);
      item.replaceWith(fresh);
      item = fresh;
    };
    return {
      code: (text) => {
        run.code = text.length > OUTPUT_KEPT ? `${text.slice(0, OUTPUT_KEPT)}\n… (${text.length - OUTPUT_KEPT} more characters)` : text;
        update();
        this.saveSoon();
      },
      output: (stream, text) => {
        const room = OUTPUT_KEPT - run[stream].length;
        run[stream] += text.slice(0, Math.max(0, room));
        run.cut += Math.max(0, text.length - Math.max(0, room));
        item.querySelector(`pre[data-stream="${stream}"]`).textContent = run[stream];
        this.saveSoon();
      },
      finish: ({ exitCode, usage, error, files = [] }) => {
        Object.assign(run, ended(exitCode, error, usage?.wallMs ?? Date.now() - run.startedAt), {
          files: files.map(({ path, size, url }) => ({ path, size, url })),
        });
        update();
        this.save();
        this.onFinish(run);
      },
    };
  }

  /**
   * A run of the relay session that ended where this tab did not execute it (the `ran`
   * command: at the edge), listed once however often it is told.
   */
  record({ runId, tool, language, executor, startedAt, wallMs, exitCode, error, stdout, stderr }) {
    if (this.runs.some((run) => run.runId === runId)) return;
    const run = { runId, tool, language, executor, startedAt, code: "", stdout: String(stdout), stderr: String(stderr), cut: 0, files: [] };
    this.add(Object.assign(run, ended(exitCode, error, wallMs)));
    this.save();
  }

  /**
   * Lists `run` by when it started, newest first (a tab's new run goes on top; an edge run told
   * again on a reattach goes back where it was, or nowhere if the RUNS_KEPT listed are all
   * newer); the oldest beyond RUNS_KEPT go. Returns its item.
   */
  add(run) {
    const newer = this.runs.findIndex((listed) => listed.startedAt <= run.startedAt);
    const at = newer < 0 ? this.runs.length : newer;
    this.runs.splice(at, 0, run);
    const dropped = this.runs.splice(RUNS_KEPT);
    for (const old of dropped) this.itemOf(old)?.remove();
    const item = render(run);
    if (!dropped.includes(run)) {
      const next = this.runs[at + 1] && this.itemOf(this.runs[at + 1]);
      if (next) next.before(item);
      else this.listEl.append(item);
    }
    this.showEmpty();
    return item;
  }

  itemOf(run) {
    return this.listEl.querySelector(`[data-run-id="${CSS.escape(run.runId)}"]`);
  }

  showEmpty() {
    this.emptyEl.hidden = this.runs.length > 0;
  }

  saveSoon() {
    this.saveTimer ??= setTimeout(() => this.save(), SAVE_EVERY_MS);
  }

  save() {
    clearTimeout(this.saveTimer);
    this.saveTimer = null;
    try {
      localStorage.setItem(this.storageKey, JSON.stringify(this.runs));
    } catch {
      // Storage full or off: the list still works for this page's life.
    }
  }
}

function load(storageKey) {
  try {
    const runs = JSON.parse(localStorage.getItem(storageKey) ?? "[]");
    // A run the page was executing when it went away never reported its end here.
    return runs.slice(0, RUNS_KEPT).map((run) => (run.status === "running" ? { ...run, status: "interrupted" } : run));
  } catch {
    return [];
  }
}

/** What a run's end makes of it in the list. */
function ended(exitCode, error, wallMs) {
  return { status: error ? error.name : exitCode === 0 ? "ok" : "failed", exitCode, wallMs, error: error ? `${error.name}: ${error.message}` : null };
}

/** One run as a list item: a summary line that opens to what ran, its output and files. */
function render(run, open = false, codeOpen = false) {
  const item = el("li", { className: "run" });
  item.dataset.runId = run.runId;
  item.dataset.status = run.status;
  item.dataset.executor = run.executor ?? "tab";
  const details = el("details", { open });
  const summary = el(
    "summary",
    {},
    el("span", { className: "run-tool", textContent: run.tool }),
    el("span", { className: "run-what", textContent: run.target ?? LANGUAGES[run.language] ?? run.language ?? "" }),
    ...(run.executor === "edge" ? [el("span", { className: "run-where", textContent: "edge", title: "ran at the edge, with no tab" })] : []),
    el("span", { className: "run-status", textContent: statusText(run) }),
    el("span", { className: "run-time", textContent: new Date(run.startedAt).toLocaleTimeString() }),
  );
  details.append(summary);
  if (run.code) details.append(codeView(run, codeOpen));
  if (run.error) details.append(el("p", { className: "error", textContent: run.error }));
  for (const stream of ["stdout", "stderr"]) {
    details.append(el("h3", { textContent: stream }));
    const pre = el("pre", { textContent: run[stream], tabIndex: 0 });
    pre.dataset.stream = stream;
    pre.setAttribute("aria-label", `${stream} of run ${run.runId}`);
    details.append(pre);
  }
  if (run.cut) details.append(el("p", { textContent: `(${run.cut} more characters of output are in the MCP result, not shown here)` }));
  if (run.files.length) {
    details.append(el("h3", { textContent: "files in /out" }));
    const list = el("ul");
    for (const file of run.files) {
      const name = file.url ? el("a", { href: file.url, textContent: file.path, download: file.path.split("/").pop() }) : `${file.path} (not uploaded)`;
      list.append(el("li", {}, name, ` (${file.size} bytes)`, ...thumbnail(file)));
    }
    details.append(list);
  }
  item.append(details);
  return item;
}

/** What ran, collapsed: a run's code, or a file tool's arguments. */
function codeView(run, open) {
  const what = run.language ? "code" : "arguments";
  const pre = el("pre", { textContent: run.code, tabIndex: 0 });
  pre.dataset.view = "code";
  pre.setAttribute("aria-label", `${what} of run ${run.runId}`);
  return el("details", { className: "run-code", open }, el("summary", { textContent: what }), pre);
}

/** A thumbnail of an uploaded image file (none for other files, or once its URL stops working). */
function thumbnail(file) {
  const extension = file.path.split(".").pop().toLowerCase();
  if (!file.url || !IMAGE_EXTENSIONS.includes(extension) || !file.path.includes(".")) return [];
  const img = el("img", { src: file.url, alt: `thumbnail of ${file.path}`, className: "thumb", loading: "lazy" });
  img.onerror = () => img.remove(); // expired (URLs last an hour): the link says the rest
  return [el("br"), img];
}

function el(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

function statusText(run) {
  if (run.status === "running" || run.status === "interrupted") return run.status;
  const seconds = `${((run.wallMs ?? 0) / 1000).toFixed(run.wallMs < 1000 ? 3 : 1)} s`;
  return `${run.status} · exit ${run.exitCode} · ${seconds}`;
}
