// A run's `exit` event as the relay takes it (relay_core::run::backchannel, EventBody::Exit).
// The fields its usage, error and files may carry come from the core at build time
// (`relay-capsule exit-fields`, wired in by scripts/build-assets.mjs): the relay refuses a
// batch with a field it does not know, and with it every other event of that batch, so the
// page sends only these, whatever else its own outcomes hold (a file's url, say). Its usage
// (wallMs, memPeakMb, fetches, denied, fileErrors) is all in the list.

import EXIT_FIELDS from "relay-exit-fields";

/** `value` with only the fields in `names` that it has. */
function only(names, value) {
  return Object.fromEntries(names.filter((name) => value[name] !== undefined).map((name) => [name, value[name]]));
}

/** The exit event of a run that ended with `outcome`: `{exitCode, usage, error?, files?, displays?}`. */
export function exitEvent({ exitCode, usage = {}, error, files, displays }) {
  return {
    type: "exit",
    exitCode,
    usage: only(EXIT_FIELDS.usage, usage),
    ...(files && { files: files.map((file) => only(EXIT_FIELDS.file, file)) }),
    ...(displays?.length && { displays: displays.map((display) => only(EXIT_FIELDS.display, display)) }),
    ...(error && { error: only(EXIT_FIELDS.error, error) }),
  };
}
