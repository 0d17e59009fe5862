// The page's clock in a hidden tab (lib/clock.js): posts the id of each interval the page asked
// for, every time it is due. A background page's own chained timers may run once a minute
// (Chrome's intensive throttling, after 5 minutes hidden); a worker's are not throttled so.
// Messages: page -> {id, everyMs} (start, or restart) | {id, everyMs: null} (stop); worker -> id.

const intervals = new Map(); // id -> interval handle

self.onmessage = ({ data: { id, everyMs } }) => {
  clearInterval(intervals.get(id));
  intervals.delete(id);
  if (everyMs) intervals.set(id, setInterval(() => self.postMessage(id), everyMs));
};
