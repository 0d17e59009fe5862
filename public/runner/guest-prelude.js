// The Node-like globals a JS capsule sees inside QuickJS: console, process, timers.
// guestPrelude is never called in the worker: quickjs.js evaluates its source text inside each
// fresh QuickJS context, so it must stay self-contained (no imports, no outer variables).
//
// What capsule code can use:
//   console.log/info/debug -> stdout; console.error/warn -> stderr (Node-like formatting)
//   process.argv ["quickjs", <entry path>, ...args], process.env, process.cwd(), process.exit(code)
//   process.stdout.write(text), process.stderr.write(text)
//   process.stdin.read() -> the whole stdin as a string ("" when none was given)
//   setTimeout/clearTimeout, setInterval/clearInterval, queueMicrotask, globalThis/global

/**
 * @param host functions the worker provides: write(fd, text), exit(code),
 *   setTimer(callback, ms, repeat) -> id, clearTimer(id)
 * @param configJson JSON of {entry, argv, env, cwd, stdin}
 * @returns formatError(value) -> string, used by the worker to print uncaught errors
 */
export function guestPrelude(host, configJson) {
  const config = JSON.parse(configJson);
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
    argv: ["quickjs", config.entry, ...config.argv],
    env: { ...config.env },
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

  return formatError;
}
