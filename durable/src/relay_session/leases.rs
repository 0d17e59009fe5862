//! Where the DO reads the tabs' leases (`run::lease`). Each tab's lease worker pings on a lease
//! socket of its own (`/lease`), a hibernatable WebSocket that the runtime answers itself: the
//! hibernation API's auto-response replies `pong` without running a handler or waking a
//! hibernated DO, and notes when. [`Leases::seen`] reads those times for the run machine
//! (`Input::TabSeen`); nothing here decides whether a tab is gone.

use crate::platform::now_ms;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use worker::worker_sys::{DurableObjectState, WebSocketRequestResponsePair};
use worker::{js_sys, web_sys, State, WebSocket};

/// What a lease worker sends, and what the runtime answers for the DO.
pub const PING: &str = "ping";
const PONG: &str = "pong";
/// The tag every lease socket carries (its other tags: its tab, and its token's expiry).
pub const LEASE_TAG: &str = "lease";
/// The tag of a tab's command socket (the Worker's, which holds the tab's SSE stream); its other
/// tag is its tab.
pub const EVENTS_TAG: &str = "events";
/// A socket's tag that holds its attach token's expiry (`exp:<seconds>`), results socket or lease.
pub const EXPIRY_TAG: &str = "exp:";

#[wasm_bindgen]
extern "C" {
    /// The `DurableObjectState` methods workers-rs 0.8 does not bind.
    type AutoResponses;

    /// When the runtime last auto-responded on `ws` (null: never).
    #[wasm_bindgen(method, js_name = getWebSocketAutoResponseTimestamp)]
    fn last_auto_response(this: &AutoResponses, ws: &web_sys::WebSocket) -> Option<js_sys::Date>;
}

/// The lease sockets of one relay session's DO.
pub struct Leases {
    state: DurableObjectState,
}

impl Leases {
    /// Has the runtime answer every `ping` on this DO's hibernatable sockets (no other message
    /// of the tabs' is exactly that).
    pub fn new(state: &State) -> Self {
        match WebSocketRequestResponsePair::new(PING, PONG) {
            Ok(pair) => state.set_websocket_auto_response(&pair),
            Err(e) => worker::console_error!("no lease auto-response: {e:?}"),
        }
        let raw: &JsValue = state.as_raw().as_ref();
        Leases { state: raw.clone().unchecked_into() }
    }

    /// Each lease socket's tab and when it last pinged, leaving out sockets that never pinged
    /// and those past their attach token's expiry (a tab that can no longer refresh its token
    /// cannot keep its lease either).
    pub fn seen(&self) -> Vec<(String, u64)> {
        let now_s = now_ms() / 1000;
        let sockets = self.state.get_websockets_with_tag(LEASE_TAG).unwrap_or_default();
        let autoresponses: &AutoResponses = self.state.unchecked_ref();
        sockets
            .iter()
            .filter_map(|ws| {
                let tags = self.state.get_tags(ws).ok()?;
                let (tab, expiry) = socket_tags(&tags);
                let pinged = autoresponses.last_auto_response(ws)?;
                let tab = tab.filter(|_| now_s < expiry)?;
                Some((tab.to_owned(), pinged.get_time() as u64))
            })
            .collect()
    }

    /// Closes `tab`'s lease sockets: it was dropped, and its lease worker should know.
    pub fn close(&self, tab: &str) {
        for ws in self.state.get_websockets_with_tag(LEASE_TAG).unwrap_or_default() {
            let tags = self.state.get_tags(&ws).unwrap_or_default();
            if socket_tags(&tags).0 == Some(tab) {
                let _ = WebSocket::from(ws).close(Some(4410), Some("this tab was dropped: attach again"));
            }
        }
    }
}

/// A socket's tab and its token's expiry (seconds; 0 when it has none), from its tags.
pub fn socket_tags(tags: &[String]) -> (Option<&str>, u64) {
    let expiry = tags.iter().find_map(|t| t.strip_prefix(EXPIRY_TAG)?.parse::<u64>().ok()).unwrap_or(0);
    let tab =
        tags.iter().find(|t| *t != LEASE_TAG && *t != EVENTS_TAG && !t.starts_with(EXPIRY_TAG)).map(String::as_str);
    (tab, expiry)
}
