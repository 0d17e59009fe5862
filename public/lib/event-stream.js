// Reads a text/event-stream response body (the HTML Server-Sent Events format) and calls
// onEvent(type, data) for each event. The page reads its command stream with fetch() and this
// reader instead of EventSource, so that the attach token travels in a header, not the URL.

/** Resolves when the stream ends; rejects when reading fails (e.g. the connection drops). */
export async function readEventStream(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  let event = { type: "message", data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffered += value;
    const lines = buffered.split(/\r\n|\r|\n/);
    buffered = lines.pop(); // a line is only complete once its end arrives
    for (const line of lines) {
      if (line === "") {
        if (event.data.length) onEvent(event.type, event.data.join("\n"));
        event = { type: "message", data: [] };
        continue;
      }
      const colon = line.indexOf(":");
      if (colon === 0) continue; // a comment: heartbeats
      const field = colon < 0 ? line : line.slice(0, colon);
      const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") event.type = text;
      else if (field === "data") event.data.push(text);
    }
  }
}
