//! The tabs attached as executors: their SSE command streams (`/events`) and the NDJSON
//! backchannel their results come back on (`/result`). Both feed the run machine.

use super::shared::{ticker, Shared};
use crate::edge::http::{json, named, sse_headers};
use crate::edge::random;
use futures::channel::mpsc;
use relay_core::error::ErrorName;
use relay_core::forward::Caller;
use relay_core::mcp::sse_frame;
use relay_core::run::backchannel::parse_batch;
use relay_core::run::readiness::Readiness;
use relay_core::run::session::{Input, Output};
use serde_json::json;
use std::rc::Rc;
use worker::{Request, Response, Result};

/// The header a tab's result batches name it in (the `tabId` of its `hello`).
const TAB_HEADER: &str = "x-relay-tab";

/// `GET /session/:id/events`: a tab attaches. Its stream carries `hello`, then `capsule`,
/// `cancel` and `shutdown` commands, and heartbeat comments.
pub fn attach(shared: Rc<Shared>, caller: &Caller) -> Result<Response> {
    let (tx, rx) = mpsc::unbounded();
    let tab = format!("tab_{}", hex::encode(random::<6>()));
    let hello = json!({ "tabId": tab, "session": caller.session });
    let _ = tx.unbounded_send(Ok(b"retry: 2000\n\n".to_vec()));
    let _ = tx.unbounded_send(Ok(sse_frame("hello", &hello, None).into_bytes()));
    shared.add_tab(&tab, tx);
    shared.feed(Input::TabAttached { tab: tab.clone() });
    // The tab's stream ticks too: heartbeats find a closed tab even while no run is in flight.
    let ticking = ticker(shared, move |s| s.has_tab(&tab), None);
    Ok(Response::from_stream(futures::stream::select(rx, ticking))?.with_headers(sse_headers()))
}

/// `POST /session/:id/detach`: the tab named in `x-relay-tab` is going away (its page is
/// closing or reloading), so the next run goes to another tab at once rather than after a
/// heartbeat finds its stream closed. A run it was executing ends as a lost tab's does.
pub fn detach(shared: Rc<Shared>, req: &Request) -> Result<Response> {
    if let Some(tab) = req.headers().get(TAB_HEADER)?.filter(|tab| shared.has_tab(tab)) {
        shared.drop_tab(&tab);
        shared.feed(Input::TabGone { tab });
    }
    Ok(Response::empty()?.with_status(204))
}

/// `POST /session/:id/ready`: what the tab named in `x-relay-tab` says of its runtimes
/// (`run::readiness`), shown in `relay://session` and told to a run that waits for one.
pub async fn ready(shared: Rc<Shared>, mut req: Request) -> Result<Response> {
    let readiness = match Readiness::parse(&req.bytes().await?) {
        Ok(readiness) => readiness,
        Err(why) => return Ok(named(ErrorName::ValidationError, why)),
    };
    let Some(tab) = req.headers().get(TAB_HEADER)?.filter(|tab| shared.has_tab(tab)) else {
        let message = format!("{TAB_HEADER} must name a tab attached to this relay session (the tabId of its hello)");
        return Ok(named(ErrorName::ValidationError, message));
    };
    shared.set_readiness(&tab, readiness);
    Ok(Response::empty()?.with_status(204))
}

/// `POST /session/:id/result`: applies a batch of the tab's events to their runs, each event on
/// its own (see `run::session` for the verdicts: 200, 404 or 409 listing what was refused).
pub async fn result(shared: Rc<Shared>, mut req: Request) -> Result<Response> {
    let events = match parse_batch(&req.bytes().await?) {
        Ok(events) => events,
        Err(why) => return Ok(named(ErrorName::ValidationError, format!("result batch: {why}"))),
    };
    let tab = req.headers().get(TAB_HEADER)?;
    let answers = shared.feed(Input::Heard { tab, events });
    let Some(Output::Reply(reply)) = answers.into_iter().find(|o| matches!(o, Output::Reply(_))) else {
        return Ok(named(ErrorName::Internal, "the run machine did not answer the batch"));
    };
    Ok(json(reply.status(), &reply.to_json()))
}
