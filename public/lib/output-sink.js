// A run's output cap (limits.stdoutBytes, counted over stdout and stderr together, in UTF-8
// bytes): forwards text as it is produced, and past the cap nothing more. Counted twice: in the
// runner worker (runner/serve.js), so that a well-behaved run stops early, and by the page
// (lib/runner-host.js), which trusts no count a guest could tamper with and stops the run once
// its own count passes the cap. The runner's sink (`overshoot`) therefore forwards, with what
// still fits, the character that crosses the cap: the page sees the run go over even when the
// guest swallows the error the runner raises (Python's warnings module drops any OSError from
// stderr and carries on).

const encoder = new TextEncoder();

export class OutputSink {
  /** @param options.overshoot past the cap, forward one character more than fits (see above) */
  constructor(limitBytes, post, { overshoot = false } = {}) {
    this.limitBytes = limitBytes;
    this.post = post;
    this.overshoot = overshoot;
    this.usedBytes = 0;
    this.exceeded = false;
  }

  /** Forwards `text` on `stream` ("stdout" | "stderr"); false once the cap is reached. */
  write(stream, text) {
    if (this.exceeded) return false;
    if (text === "") return true;
    const bytes = encoder.encode(text);
    const room = this.limitBytes - this.usedBytes;
    if (bytes.length <= room) {
      this.usedBytes += bytes.length;
      this.post({ type: stream, data: text });
      return true;
    }
    this.exceeded = true;
    // Forward what still fits, cut on a character boundary (a streaming decode holds back a
    // trailing partial character instead of emitting U+FFFD); overshooting, 4 bytes more, which
    // hold at least the character that crosses the cap (UTF-8 takes at most 4 for one).
    const cut = this.overshoot ? room + 4 : room;
    const head = new TextDecoder().decode(bytes.subarray(0, cut), { stream: true });
    if (head) this.post({ type: stream, data: head });
    this.usedBytes = this.limitBytes;
    return false;
  }
}
