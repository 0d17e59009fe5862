// Reads a text/event-stream response body (the HTML Server-Sent Events format) and calls
// onEvent(type, data) for each event. The page reads its command stream with fetch() and this
// reader instead of EventSource, so that the attach token travels in a header, not the URL.
// parseEvent reads one such event on its own: a command's copy on the results socket.

/**
 * Resolves when the stream ends; rejects when reading fails (e.g. the connection drops).
 * `onHeard()` is called for every chunk read, heartbeats too: what a watch for silence needs.
 */
export async function readEventStream(body, onEvent, onHeard = () => {}) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  const parser = new EventParser(onEvent);
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    onHeard();
    buffered += value;
    const lines = buffered.split(/\r\n|\r|\n/);
    buffered = lines.pop(); // a line is only complete once its end arrives
    for (const line of lines) parser.line(line);
  }
}

/** The event one complete frame (`event: ...\ndata: ...\n\n`) holds: {type, data}, or null. */
export function parseEvent(frame) {
  let parsed = null;
  const parser = new EventParser((type, data) => (parsed ??= { type, data }));
  for (const line of frame.split(/\r\n|\r|\n/)) parser.line(line);
  return parsed;
}

/** Lines in, events out: a blank line ends an event; comments (heartbeats) are skipped. */
class EventParser {
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.event = { type: "message", data: [] };
  }

  line(line) {
    if (line === "") {
      if (this.event.data.length) this.onEvent(this.event.type, this.event.data.join("\n"));
      this.event = { type: "message", data: [] };
      return;
    }
    const colon = line.indexOf(":");
    if (colon === 0) return; // a comment: heartbeats
    const field = colon < 0 ? line : line.slice(0, colon);
    const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") this.event.type = text;
    else if (field === "data") this.event.data.push(text);
  }
}
