// A run's output cap (limits.stdoutBytes, counted over stdout and stderr together, in UTF-8
// bytes): forwards text as it is produced, and past the cap nothing more. Counted twice: in the
// runner worker (runner/serve.js), so that a well-behaved run stops early, and by the page
// (lib/runner-host.js), which trusts no count a guest could tamper with.

const encoder = new TextEncoder();

export class OutputSink {
  constructor(limitBytes, post) {
    this.limitBytes = limitBytes;
    this.post = post;
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
    // trailing partial character instead of emitting U+FFFD).
    const head = new TextDecoder().decode(bytes.subarray(0, room), { stream: true });
    if (head) this.post({ type: stream, data: head });
    this.usedBytes = this.limitBytes;
    return false;
  }
}
