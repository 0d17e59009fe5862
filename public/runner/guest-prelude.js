// The Node-like globals a JS capsule sees inside QuickJS: console, process, timers, the `fs`
// module and fetch. guestPrelude is never called in the worker: quickjs.js evaluates its source
// text inside each fresh QuickJS context, so it must stay self-contained (no imports, no outer
// variables).
//
// What capsule code can use:
//   console.log/info/debug -> stdout; console.error/warn -> stderr (Node-like formatting)
//   process.argv ["quickjs", <entry path>, ...args], process.env, process.cwd(), process.exit(code)
//   process.stdout.write(text), process.stderr.write(text)
//   process.stdin.read() -> the whole stdin as a string ("" when none was given)
//   setTimeout/clearTimeout, setInterval/clearInterval, queueMicrotask, globalThis/global
//   TextEncoder/TextDecoder (UTF-8)
//   import fs from "fs" (or "node:fs"; "fs/promises" and "node:fs/promises" for the promise API):
//     readFileSync(path, encoding?) -> a string with an encoding ("utf8"), else a Uint8Array
//     writeFileSync(path, data), appendFileSync(path, data)   data: string | Uint8Array | ArrayBuffer
//     existsSync, readdirSync (sorted names), statSync/lstatSync (isFile(), isDirectory(), size),
//     mkdirSync(path, {recursive}), unlinkSync, rmdirSync, rmSync(path, {recursive, force}),
//     renameSync, copyFileSync; fs.promises.* and "fs/promises": the same as promises
//     (readFile, writeFile, appendFile, readdir, stat, mkdir, unlink, rmdir, rm, rename, copyFile, access).
//     Relative paths resolve against process.cwd(). /tmp, /out, /host and /mcps are the relay
//     session's workspace: files there stay for the next run (JS or Python) and survive a page
//     reload; the capsule's own files are at /<path>. Only paths under policy.filesystem.writable
//     (by default /tmp and /out; never /mcps) can be written, and only by names the workspace
//     can hold (relay-core's check_path): other writes throw an Error with name "PolicyDenied",
//     code "EACCES" and the rule's sentence. Missing files throw code "ENOENT", as in Node.
//     The workspace holds at most 64 MiB. No Buffer: bytes are Uint8Array.
//   fetch(url, {method, headers, body}) -> Promise of a Response {status, statusText, ok, url,
//     headers (get, has, entries, forEach), text(), json(), arrayBuffer()}; the page fetches for
//     the run under policy.network, and a request the policy forbids rejects with an Error named
//     "PolicyDenied" whose message says what to allow.
//   mcps.call(server, tool, params) -> Promise of the tool's result ({content, structuredContent?,
//     isError?}) from one of the tenant's upstream MCP servers (/mcps/index.json and
//     /mcps/<server>.d.ts describe them); the raw form is fetch("/mcps-rpc", {method: "POST",
//     body: JSON.stringify({mcp, tool, params})}). A refusal rejects with an Error named as the
//     relay named it ("PolicyDenied", "ValidationError", "UpstreamFailed").
//   display(value, {raw}) shows a value in the call's result, as IPython's display() does: bytes
//     (Uint8Array, ArrayBuffer) of a PNG, JPEG, GIF or WebP image as that image; an object with
//     _repr_png_/_repr_jpeg_/_repr_svg_/_repr_html_/_repr_markdown_/_repr_json_ (or
//     _repr_mimebundle_) by the richest of them; a string as text; anything else as JSON (a list
//     of records or an object of columns becomes a table). With {raw: true} the value is a mime
//     bundle ({"text/html": "<b>hi</b>"}) shown by its richest type.

/**
 * @param host functions the worker provides: write(fd, text), exit(code),
 *   setTimer(callback, ms, repeat) -> id, clearTimer(id),
 *   fs(op, argsJson, data?) -> result (see quickjs.js; throws an Error named by its Node code),
 *   utf8Encode(string) -> ArrayBuffer, utf8Decode(ArrayBuffer) -> string,
 *   fetch(requestJson, body, callback(errorJson, responseJson, body))
 * @returns {formatError, configure, display}: formatError(value) -> string, used by the worker to print
 *   uncaught errors; configure(configJson) gives process the run's {entry, argv, env, cwd,
 *   stdin}. The worker calls the prelude while it waits as a standby, and configure when its
 *   run starts, before any guest code.
 */
export function guestPrelude(host) {
  let config = { entry: "", argv: [], env: {}, cwd: "/", stdin: "" };
  const MAX_DEPTH = 2;

  function inspect(value, depth, seen) {
    switch (typeof value) {
      case "string":
        return depth === 0 ? value : `'${value}'`;
      case "bigint":
        return `${value}n`;
      case "function":
        return `[Function: ${value.name || "(anonymous)"}]`;
      case "symbol":
      case "number":
      case "boolean":
      case "undefined":
        return String(value);
    }
    if (value === null) return "null";
    if (value instanceof Error) return formatError(value);
    if (value instanceof Date) return value.toISOString();
    if (value instanceof RegExp) return String(value);
    if (seen.includes(value)) return "[Circular]";
    if (depth > MAX_DEPTH) return Array.isArray(value) ? "[Array]" : "[Object]";
    const inner = (v) => inspect(v, depth + 1, [...seen, value]);
    if (Array.isArray(value)) return value.length ? `[ ${value.map(inner).join(", ")} ]` : "[]";
    if (value instanceof Map) {
      return `Map(${value.size}) { ${[...value].map(([k, v]) => `${inner(k)} => ${inner(v)}`).join(", ")} }`;
    }
    if (value instanceof Set) return `Set(${value.size}) { ${[...value].map(inner).join(", ")} }`;
    const keys = Object.keys(value);
    if (!keys.length) return "{}";
    const key = (k) => (/^[A-Za-z_$][\w$]*$/.test(k) ? k : `'${k}'`);
    return `{ ${keys.map((k) => `${key(k)}: ${inner(value[k])}`).join(", ")} }`;
  }

  function formatError(error) {
    if (!(error instanceof Error)) return inspect(error, 1, []);
    const head = `${error.name}: ${error.message}`;
    return error.stack ? `${head}\n${error.stack.replace(/\n$/, "")}` : head;
  }

  const format = (args) => args.map((arg) => inspect(arg, 0, [])).join(" ") + "\n";
  const printer = (fd) => (...args) => host.write(fd, format(args));

  globalThis.global = globalThis;
  globalThis.console = {
    log: printer(1),
    info: printer(1),
    debug: printer(1),
    error: printer(2),
    warn: printer(2),
  };

  globalThis.process = {
    argv: [],
    env: {},
    platform: "quickjs",
    cwd: () => config.cwd,
    exit(code = 0) {
      host.exit(Number(code) | 0);
      // Unwind now; the worker also interrupts the run, so a catch cannot resume it for long.
      throw new Error("process.exit");
    },
    stdout: { write: (text) => (host.write(1, String(text)), true) },
    stderr: { write: (text) => (host.write(2, String(text)), true) },
    stdin: { read: () => config.stdin },
  };

  const timer = (repeat) => (callback, ms = 0, ...args) =>
    host.setTimer(args.length ? () => callback(...args) : callback, Math.max(0, Number(ms) || 0), repeat);
  globalThis.setTimeout = timer(false);
  globalThis.setInterval = timer(true);
  globalThis.clearTimeout = globalThis.clearInterval = (id) => host.clearTimer(id);
  globalThis.queueMicrotask = (callback) => Promise.resolve().then(callback);

  const toBuffer = (data) => {
    if (typeof data === "string") return host.utf8Encode(data);
    if (data instanceof ArrayBuffer) return data;
    if (ArrayBuffer.isView(data)) return data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
    return host.utf8Encode(String(data));
  };

  globalThis.TextEncoder = class TextEncoder {
    get encoding() {
      return "utf-8";
    }
    encode(text = "") {
      return new Uint8Array(host.utf8Encode(String(text)));
    }
  };
  globalThis.TextDecoder = class TextDecoder {
    get encoding() {
      return "utf-8";
    }
    decode(data) {
      return data === undefined ? "" : host.utf8Decode(toBuffer(data));
    }
  };

  installFs();
  installFetch();

  function installFs() {
    const ERRNOS = { ENOENT: -2, EACCES: -13, EEXIST: -17, ENOTDIR: -20, EISDIR: -21, EINVAL: -22, ENOSPC: -28, ENOTEMPTY: -39, EPERM: -1 };
    const resolve = (path) => {
      if (path && typeof path === "object" && typeof path.href === "string") path = path.pathname; // a file: URL
      if (typeof path !== "string") throw new TypeError(`The "path" argument must be of type string. Received ${inspect(path, 1, [])}`);
      const parts = [];
      for (const part of (path.startsWith("/") ? path : `${config.cwd}/${path}`).split("/")) {
        if (part === "..") parts.pop();
        else if (part && part !== ".") parts.push(part);
      }
      return `/${parts.join("/")}`;
    };
    // Node's errors: "ENOENT: no such file or directory, open '/tmp/x'", with code, errno, syscall, path.
    const call = (syscall, op, path, args = {}, data) => {
      const absolute = resolve(path);
      try {
        return host.fs(op, JSON.stringify({ path: absolute, ...args }), data);
      } catch (cause) {
        throw nodeError(cause, syscall, absolute);
      }
    };
    const nodeError = (cause, syscall, path) => {
      const policy = cause.name === "PolicyDenied";
      const code = policy ? "EACCES" : cause.name;
      // The relay's own messages (policy, workspace limit) say what to change; Node's are terse.
      const message = policy || code === "ENOSPC" ? cause.message : `${code}: ${cause.message}, ${syscall} '${path}'`;
      const error = new Error(message);
      if (policy) error.name = "PolicyDenied";
      return Object.assign(error, { code, errno: ERRNOS[code], syscall, path });
    };
    const encodingOf = (options) => (typeof options === "string" ? options : options?.encoding);
    const decode = (buffer, encoding) => {
      if (!encoding || encoding === "buffer") return new Uint8Array(buffer);
      if (!/^utf-?8$/i.test(encoding)) throw new TypeError(`only the utf8 encoding is supported here, not "${encoding}"`);
      return host.utf8Decode(buffer);
    };
    const stats = (info) => ({
      size: info.size,
      isFile: () => info.kind === "file",
      isDirectory: () => info.kind === "dir",
      isSymbolicLink: () => false,
    });
    const statOf = (syscall, path) => stats(JSON.parse(call(syscall, "stat", path)));

    const fs = {
      readFileSync: (path, options) => decode(call("open", "read", path), encodingOf(options)),
      writeFileSync: (path, data, options) => void call("open", "write", path, { append: options?.flag === "a" }, toBuffer(data)),
      appendFileSync: (path, data) => void call("open", "write", path, { append: true }, toBuffer(data)),
      existsSync: (path) => {
        try {
          return Boolean(statOf("access", path));
        } catch {
          return false;
        }
      },
      readdirSync: (path) => JSON.parse(call("scandir", "list", path)),
      statSync: (path) => statOf("stat", path),
      lstatSync: (path) => statOf("lstat", path),
      accessSync: (path) => void statOf("access", path),
      mkdirSync: (path, options) => void call("mkdir", "mkdir", path, { recursive: Boolean(options?.recursive) }),
      unlinkSync: (path) => void call("unlink", "remove", path, { expect: "file" }),
      rmdirSync: (path, options) => void call("rmdir", "remove", path, { expect: "dir", recursive: Boolean(options?.recursive) }),
      rmSync: (path, options) => void call("rm", "remove", path, { recursive: Boolean(options?.recursive), force: Boolean(options?.force) }),
      renameSync: (from, to) => void call("rename", "rename", from, { to: resolve(to) }),
      copyFileSync: (from, to) => fs.writeFileSync(to, fs.readFileSync(from)),
      constants: { F_OK: 0, R_OK: 4, W_OK: 2, X_OK: 1 },
    };
    const promised = (fn) => (...args) => new Promise((resolve) => resolve(fn(...args)));
    const promises = {};
    for (const name of ["readFile", "writeFile", "appendFile", "readdir", "stat", "lstat", "access", "mkdir", "unlink", "rmdir", "rm", "rename", "copyFile"]) {
      promises[name] = promised(fs[`${name}Sync`]);
    }
    fs.promises = promises;
    for (const name of Object.keys(promises)) {
      fs[name] = (...args) => {
        const callback = args.pop();
        promises[name](...args).then((value) => callback(null, value), (error) => callback(error));
      };
    }
    // What the "fs" and "fs/promises" modules export (quickjs.js makes their source from it).
    Object.defineProperty(globalThis, "__relayModules", { value: Object.freeze({ fs, "fs/promises": promises }) });
  }

  function installFetch() {
    class Headers {
      constructor(init) {
        this._map = new Map();
        const pairs = init instanceof Headers ? init.entries() : Array.isArray(init) ? init : Object.entries(init ?? {});
        for (const [name, value] of pairs) this.append(name, value);
      }
      append(name, value) {
        const key = String(name).toLowerCase();
        this._map.set(key, this._map.has(key) ? `${this._map.get(key)}, ${value}` : String(value));
      }
      set(name, value) {
        this._map.set(String(name).toLowerCase(), String(value));
      }
      get(name) {
        return this._map.get(String(name).toLowerCase()) ?? null;
      }
      has(name) {
        return this._map.has(String(name).toLowerCase());
      }
      delete(name) {
        this._map.delete(String(name).toLowerCase());
      }
      entries() {
        return [...this._map].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))[Symbol.iterator]();
      }
      keys() {
        return [...this.entries()].map(([name]) => name)[Symbol.iterator]();
      }
      values() {
        return [...this.entries()].map(([, value]) => value)[Symbol.iterator]();
      }
      forEach(callback, thisArg) {
        for (const [name, value] of this.entries()) callback.call(thisArg, value, name, this);
      }
      [Symbol.iterator]() {
        return this.entries();
      }
    }

    class Response {
      constructor(body, { status = 200, statusText = "", headers, url = "" } = {}) {
        this._body = body == null ? new ArrayBuffer(0) : toBuffer(body);
        this.status = status;
        this.statusText = statusText;
        this.ok = status >= 200 && status < 300;
        this.url = url;
        this.headers = new Headers(headers);
        this.bodyUsed = false;
      }
      async arrayBuffer() {
        if (this.bodyUsed) throw new TypeError("Body is unusable: Body has already been read");
        this.bodyUsed = true;
        return this._body;
      }
      async bytes() {
        return new Uint8Array(await this.arrayBuffer());
      }
      async text() {
        return host.utf8Decode(await this.arrayBuffer());
      }
      async json() {
        return JSON.parse(await this.text());
      }
    }

    globalThis.Headers = Headers;
    globalThis.Response = Response;
    globalThis.fetch = (input, init = {}) =>
      new Promise((resolve, reject) => {
        const url = typeof input === "string" ? input : String(input?.url ?? input?.href ?? input);
        const method = String(init.method ?? input?.method ?? "GET").toUpperCase();
        const headers = [...new Headers(init.headers ?? input?.headers)];
        const body = init.body == null ? undefined : toBuffer(init.body);
        if (body !== undefined && (method === "GET" || method === "HEAD")) throw new TypeError(`a ${method} request cannot have a body`);
        host.fetch(JSON.stringify({ url, method, headers }), body, (errorJson, responseJson, responseBody) => {
          if (errorJson) {
            const { name, message } = JSON.parse(errorJson);
            return reject(Object.assign(new Error(message), { name }));
          }
          resolve(new Response(responseBody, JSON.parse(responseJson)));
        });
      });

    const guestFetch = globalThis.fetch;
    globalThis.display = display;
    globalThis.mcps = Object.freeze({
      async call(server, tool, params = {}) {
        const body = JSON.stringify({ mcp: server, tool, params });
        const response = await guestFetch("/mcps-rpc", { method: "POST", headers: { "content-type": "application/json" }, body });
        const answer = await response.json().catch(() => null);
        if (response.ok) return answer;
        const { name = "Internal", message = `/mcps-rpc answered HTTP ${response.status}` } = answer?.error ?? {};
        throw Object.assign(new Error(message), { name });
      },
    });
  }

  // Richest first, as a notebook picks among a mime bundle's types.
  const DISPLAY_ORDER = ["image/png", "image/jpeg", "image/svg+xml", "text/html", "text/markdown", "application/json", "text/plain"];
  const REPRS = { _repr_png_: "image/png", _repr_jpeg_: "image/jpeg", _repr_svg_: "image/svg+xml", _repr_html_: "text/html", _repr_markdown_: "text/markdown", _repr_json_: "application/json" };

  // Also what a context's script shows of its completion value (quickjs.js), as a notebook
  // shows a cell's last expression.
  function display(value, { raw = false } = {}) {
    if (value instanceof ArrayBuffer || ArrayBuffer.isView(value)) {
      const bytes = value instanceof ArrayBuffer ? value : value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength);
      return host.display("", bytes);
    }
    const bundle = raw ? value : mimeBundle(value);
    const mime = DISPLAY_ORDER.find((type) => bundle?.[type] !== undefined && bundle[type] !== null);
    if (!mime) throw new TypeError(`display: nothing to show (a mime bundle needs one of ${DISPLAY_ORDER.join(", ")})`);
    const data = bundle[mime];
    if (data instanceof ArrayBuffer || ArrayBuffer.isView(data)) return display(data);
    host.display(mime, mime === "application/json" && typeof data !== "string" ? JSON.stringify(data) : String(data));
  }

  function mimeBundle(value) {
    if (typeof value === "string") return { "text/plain": value };
    const bundle = {};
    if (value !== null && typeof value === "object") {
      if (typeof value._repr_mimebundle_ === "function") Object.assign(bundle, value._repr_mimebundle_());
      for (const [method, mime] of Object.entries(REPRS)) {
        if (typeof value[method] === "function") bundle[mime] ??= value[method]();
      }
      if (Object.keys(bundle).length) return bundle;
    }
    const json = JSON.stringify(value);
    return json === undefined ? { "text/plain": String(value) } : { "application/json": json };
  }

  function configure(configJson) {
    config = JSON.parse(configJson);
    process.argv = ["quickjs", config.entry, ...config.argv];
    process.env = { ...config.env };
  }

  return { formatError, configure, display };
}
