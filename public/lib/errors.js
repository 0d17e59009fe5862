// Errors the executor reports back by name (the seed's error model).

/** The capsule failed a check (signature, hashes, sizes, layout): it is refused, never run. */
export class ValidationError extends Error {
  name = "ValidationError";
}
