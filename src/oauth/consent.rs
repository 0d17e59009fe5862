//! What the consent page shows, from what the server checked (`GET /oauth/consent`): the
//! client's name and where that name comes from, and where the browser, with the code, goes
//! after the person answers (MCP authorization, security considerations: "MUST clearly display
//! the redirect URI hostname"). A client's name is its own words, hostile text: it is cleaned
//! of control, bidirectional and invisible characters and cut, and the page renders it as text.

use serde::Serialize;
use url::Url;

use super::document::names_document;
use super::redirect::{host_with_port, Destination};
use super::{AuthRequest, Client};
use crate::text::is_hidden;

/// Longest client name kept, in characters.
pub const CLIENT_NAME_MAX_CHARS: usize = 100;

/// `raw` as a name a person can read: no control characters, no bidirectional overrides or
/// isolates (which reorder the text around them), no zero-width or other invisible format
/// characters, runs of whitespace as one space, trimmed, at most [`CLIENT_NAME_MAX_CHARS`].
/// `None` when nothing is left.
pub fn display_name(raw: &str) -> Option<String> {
    let visible = raw.chars().filter(|&c| !is_hidden(c)).collect::<String>();
    let name = visible.split_whitespace().collect::<Vec<_>>().join(" ");
    let name: String = name.chars().take(CLIENT_NAME_MAX_CHARS).collect();
    let name = name.trim_end().to_owned();
    (!name.is_empty()).then_some(name)
}

/// Where the client's name comes from: what it registered here (anyone may register any
/// name), or its metadata document on a host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum NameSource {
    Registered,
    Document { host: String },
}

/// The consent page's facts, as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsentView {
    pub client_id: String,
    pub client_name: Option<String>,
    pub name_source: NameSource,
    pub redirect_uri: String,
    pub redirect: Destination,
}

impl ConsentView {
    /// The view of a request already checked against its client (`AuthRequest::check`).
    pub fn new(client: &Client, request: &AuthRequest) -> Option<ConsentView> {
        let name_source = if names_document(&client.client_id) {
            NameSource::Document { host: host_with_port(&Url::parse(&client.client_id).ok()?)? }
        } else {
            NameSource::Registered
        };
        Some(ConsentView {
            client_id: client.client_id.clone(),
            client_name: client.client_name.as_deref().and_then(display_name),
            name_source,
            redirect_uri: request.redirect_uri.clone(),
            redirect: Destination::of(&request.redirect_uri)?,
        })
    }
}
