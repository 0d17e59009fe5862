// The relay's error names (relay-core's ErrorName): the table comes from the Rust core at build
// time (`relay-capsule error-names`, wired in by scripts/build-assets.mjs), so the page and the
// Worker cannot disagree on a name or its exit code, and the page names no error the relay does
// not have. `tool` marks the names a run may end with.

import ERROR_NAMES from "relay-error-names";

/** The capsule failed a check (signature, hashes, sizes, layout): it is refused, never run. */
export class ValidationError extends Error {
  name = "ValidationError";
}

/** How a run ends with error `name`: `{exitCode, error: {name, message}}`. */
export function failure(name, message) {
  const entry = ERROR_NAMES[name];
  if (!entry?.tool) throw new Error(`"${name}" is not one of the error names a relay-edge run ends with`);
  return { exitCode: entry.exitCode, error: { name, message } };
}

/** `{name, message}` of one of relay-edge's error names (any of them, a run's or a route's). */
export function relayError(name, message) {
  if (!Object.hasOwn(ERROR_NAMES, name)) throw new Error(`"${name}" is not one of relay-edge's error names`);
  return { name, message };
}

/** An Error whose `name` is one of relay-edge's error names, to be reported as such. */
export function namedError(name, message) {
  return Object.assign(new Error(message), { name });
}

/** Whether `name` is one of the error names a relay-edge run ends with. */
export function isErrorName(name) {
  return Object.hasOwn(ERROR_NAMES, name) && ERROR_NAMES[name].tool;
}

/** The run printed more than its cap allows. */
export function outputLimitFailure(limitBytes) {
  const message = `output exceeded the limit of ${limitBytes} bytes (stdout and stderr together, policy.limits.stdoutBytes); the run was stopped and the rest dropped`;
  return failure("OutputLimitExceeded", message);
}
