// A run's output inside the runner worker: forwards stdout/stderr text to the page as it is
// produced, and enforces the capsule's output cap (limits.stdoutBytes, counted over stdout and
// stderr together, in UTF-8 bytes). Past the cap nothing more is forwarded and the engines stop
// the run. The page counts again (lib/runner-host.js): this copy lets a run stop early.

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
