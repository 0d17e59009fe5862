// HTTP helpers shared by the executor: fetch that turns the server's JSON errors
// ({error:{name, message}}) into exceptions, and the retry schedule of capsule transfer and the
// result backchannel: 3 retries, after 1 s, 2 s and 4 s, so that a blip of a few seconds loses
// nothing. The page's reconnect loops wait on the same doubling schedule, capped (backoffMs).

const RETRIES = 3;

export class HttpError extends Error {
  /** @param body the server's JSON answer, when it sent one */
  constructor(status, name, message, body = null) {
    super(message);
    this.status = status;
    this.serverName = name;
    this.body = body;
  }

  /**
   * The error of a refused request `what`: named and worded by the server's JSON `body` when it
   * sent one ({error: {name, message}}), else by `status` and `fallback`.
   */
  static refused(what, status, body, fallback = "") {
    const name = body?.error?.name ?? `HTTP ${status}`;
    return new HttpError(status, name, `${what}: ${name}: ${body?.error?.message ?? fallback}`, body);
  }
}

/** fetch() that resolves only for 2xx answers. */
export async function fetchOk(url, init) {
  const res = await fetch(url, init);
  if (res.ok) return res;
  const body = await res.json().catch(() => null);
  const what = `${init?.method ?? "GET"} ${new URL(url, location.href).pathname}`;
  throw HttpError.refused(what, res.status, body, res.statusText);
}

/**
 * Worth retrying: network failures, timeouts, rate limits, server errors (not 4xx refusals). A
 * tenant's quota (429 QuotaExceeded) is not: it comes back after its Retry-After (up to an
 * hour), not within the retries' seconds.
 */
export function isTransient(err) {
  if (!(err instanceof HttpError)) return err.name !== "AbortError";
  if (isQuotaRefusal(err)) return false;
  return err.status === 408 || err.status === 425 || err.status === 429 || err.status >= 500;
}

/** Whether `err` is a tenant's quota refusing the request (429 QuotaExceeded). */
export function isQuotaRefusal(err) {
  return err instanceof HttpError && err.serverName === "QuotaExceeded";
}

/**
 * Calls `attempt(n)` until it succeeds, retrying transient failures after each delay in turn.
 * `beforeRetry(err)` may repair things between attempts (e.g. refresh an expired token).
 */
export async function withRetry(attempt, { retryable = isTransient, beforeRetry = async () => {}, signal } = {}) {
  for (let n = 0; ; n++) {
    try {
      return await attempt(n);
    } catch (err) {
      if (n >= RETRIES || signal?.aborted || !retryable(err)) throw err;
      await sleep(backoffMs(n));
      await beforeRetry(err);
    }
  }
}

/** The wait after `failures` failures in a row: 1 s, doubling each time, at most `maxMs`. */
export function backoffMs(failures, maxMs = Infinity) {
  return Math.min(1000 * 2 ** failures, maxMs);
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
