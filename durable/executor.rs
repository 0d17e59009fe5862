//! The tabs attached as executors: their SSE command streams, the scheduler that hands the
//! next queued run to a tab, and the NDJSON backchannel that feeds results into runs.

use super::session::{Caller, Shared, Signal, Tab};
use crate::auth::tenant::hex;
use crate::edge::http::{error, json};
use crate::edge::{now_ms, random};
use crate::run::backchannel::{parse_batch, Applied, EventBody, TabEvent};
use crate::run::lease::Lease;
use futures::channel::mpsc;
use serde_json::json;
use std::rc::Rc;
use worker::{Headers, Request, Response, Result};

/// An SSE frame with an event name.
pub fn sse_frame(event: &str, data: &serde_json::Value) -> Vec<u8> {
    format!("event: {event}\ndata: {data}\n\n").into_bytes()
}

/// Headers every SSE response carries (no proxy buffering, no caching).
pub fn sse_headers() -> Headers {
    let headers = Headers::new();
    let _ = headers.set("content-type", "text/event-stream");
    let _ = headers.set("cache-control", "no-cache, no-transform");
    let _ = headers.set("x-accel-buffering", "no");
    headers
}

/// `GET /session/:id/events`: a tab attaches. Its stream carries `hello`, then `capsule`,
/// `cancel` and `shutdown` commands, and heartbeat comments.
pub fn attach(shared: Rc<Shared>, caller: &Caller) -> Result<Response> {
    let (tx, rx) = mpsc::unbounded();
    let tab_id = format!("tab_{}", hex(&random::<6>()));
    let hello = json!({ "tabId": tab_id, "session": caller.session });
    let _ = tx.unbounded_send(Ok(b"retry: 2000\n\n".to_vec()));
    let _ = tx.unbounded_send(Ok(sse_frame("hello", &hello)));
    {
        let mut inner = shared.inner.borrow_mut();
        inner.tabs.push(Tab { id: tab_id, tx });
        for slot in inner.runs.values() {
            let _ = slot.signals.unbounded_send(Signal::TabAttached);
        }
    }
    pump(&shared);
    Ok(Response::from_stream(rx)?.with_headers(sse_headers()))
}

/// Sends `frame` to a tab; a failed write means the tab is gone, so it is dropped.
pub fn send_to_tab(shared: &Shared, tab_id: &str, frame: Vec<u8>) -> bool {
    let mut inner = shared.inner.borrow_mut();
    let Some(i) = inner.tabs.iter().position(|t| t.id == tab_id) else { return false };
    if inner.tabs[i].tx.unbounded_send(Ok(frame)).is_ok() {
        return true;
    }
    inner.tabs.remove(i);
    false
}

/// Heartbeats every tab, drops the dead ones, and tells runs whose tab died.
pub fn heartbeat(shared: &Shared) {
    let ids: Vec<String> = shared.inner.borrow().tabs.iter().map(|t| t.id.clone()).collect();
    for id in ids {
        if !send_to_tab(shared, &id, b": heartbeat\n\n".to_vec()) {
            let inner = shared.inner.borrow();
            for slot in inner.runs.values().filter(|s| s.tab_id.as_deref() == Some(&id) && s.log.exit.is_none()) {
                let _ = slot.signals.unbounded_send(Signal::TabGone);
            }
        }
    }
}

/// Moves the queue on: expired runs are told, and the next run goes to a live tab.
pub fn pump(shared: &Shared) {
    loop {
        let (step, tab_id) = {
            let mut inner = shared.inner.borrow_mut();
            // The newest tab: an older one may have gone without the runtime noticing.
            let tab_id = inner.tabs.last().map(|t| t.id.clone());
            let Some(queue) = inner.queue.as_mut() else { return };
            (queue.step(now_ms(), tab_id.is_some()), tab_id)
        };
        for run_id in &step.expired {
            signal(shared, run_id, Signal::Expired);
        }
        let (Some(run_id), Some(tab_id)) = (step.started, tab_id) else { return };
        let frame = shared.inner.borrow().runs.get(&run_id).map(|s| s.capsule_event.clone());
        let Some(frame) = frame else {
            // Its slot is gone (the run was dropped): free the executor for the next one.
            if let Some(queue) = shared.inner.borrow_mut().queue.as_mut() {
                queue.remove(&run_id);
            }
            continue;
        };
        if send_to_tab(shared, &tab_id, frame) {
            if let Some(slot) = shared.inner.borrow_mut().runs.get_mut(&run_id) {
                slot.tab_id = Some(tab_id.clone());
                slot.lease = Some(Lease::new(now_ms()));
            }
            signal(shared, &run_id, Signal::Started);
            return;
        }
        // That tab was dead: give the run back and try the next tab.
        if let Some(queue) = shared.inner.borrow_mut().queue.as_mut() {
            queue.requeue_front(&run_id, now_ms());
        }
    }
}

fn signal(shared: &Shared, run_id: &str, signal: Signal) {
    if let Some(slot) = shared.inner.borrow().runs.get(run_id) {
        let _ = slot.signals.unbounded_send(signal);
    }
}

/// `POST /session/:id/result`: applies a batch of the tab's events to their runs, each event on
/// its own: duplicates (a retried batch) are skipped, and events for an unknown run, after a
/// run ended, or past a gap are refused without holding back the rest of the batch. Any refusal
/// makes the answer 409 (404 when no event named a known run), listing what was refused.
pub async fn result(shared: Rc<Shared>, mut req: Request) -> Result<Response> {
    let events = match parse_batch(&req.bytes().await?) {
        Ok(events) => events,
        Err(why) => return Ok(error(400, "ValidationError", format!("result batch: {why}"))),
    };
    let (mut applied, mut duplicates, mut refused, mut unknown) = (0, 0, Vec::new(), 0);
    for event in &events {
        let why = match apply(&shared, event) {
            None => {
                unknown += 1;
                format!("no run {} in this relay session", event.run_id)
            }
            Some(Applied::New) => {
                applied += 1;
                continue;
            }
            Some(Applied::Duplicate) => {
                duplicates += 1;
                continue;
            }
            Some(Applied::Gap { expected }) => format!("expected seq {expected}"),
            Some(Applied::Finished) => "the run has already ended".to_owned(),
        };
        refused.push(json!({ "runId": event.run_id, "seq": event.seq, "reason": why }));
    }
    let (status, error) = match refused.len() {
        0 => (200, None),
        n if n == unknown && applied + duplicates == 0 => (404, Some("UnknownRun")),
        _ => (409, Some("EventsRefused")),
    };
    let mut body = json!({ "applied": applied, "duplicates": duplicates, "refused": refused });
    if let Some(name) = error {
        body["error"] =
            json!({ "name": name, "message": format!("{} of {} events refused", refused.len(), events.len()) });
    }
    Ok(json(status, &body))
}

/// Applies one event to its run (`None`: no such run), forwarding what the output cap kept.
fn apply(shared: &Shared, event: &TabEvent) -> Option<Applied> {
    let outcome = {
        let mut inner = shared.inner.borrow_mut();
        let slot = inner.runs.get_mut(&event.run_id)?;
        let before = (slot.log.stdout.len(), slot.log.stderr.len());
        let outcome = slot.log.apply(event);
        if let Some(lease) = slot.lease.as_mut() {
            lease.heard(now_ms());
        }
        if outcome == Applied::New {
            let body = match &event.body {
                EventBody::Stdout { .. } => EventBody::Stdout { data: slot.log.stdout[before.0..].to_owned() },
                EventBody::Stderr { .. } => EventBody::Stderr { data: slot.log.stderr[before.1..].to_owned() },
                other => other.clone(),
            };
            let nothing_kept =
                matches!(&body, EventBody::Stdout { data } | EventBody::Stderr { data } if data.is_empty());
            if !nothing_kept {
                let _ = slot.signals.unbounded_send(Signal::Event(body));
            }
        }
        outcome
    };
    if outcome == Applied::New && matches!(event.body, EventBody::Exit { .. }) {
        finish(shared, &event.run_id);
    }
    Some(outcome)
}

/// Frees the executor after a run ended and starts the next one.
pub fn finish(shared: &Shared, run_id: &str) {
    if let Some(queue) = shared.inner.borrow_mut().queue.as_mut() {
        queue.remove(run_id);
    }
    pump(shared);
}
