//! What the authorization server stores and checks: clients, authorization requests, codes,
//! grants and tokens, and the rules each request to it must pass.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use url::Url;

use super::consent::display_name;
use super::redirect::{self, REDIRECT_URIS_MAX};
use super::{verify_pkce, OAuthError, SCOPE};

/// A registered client: by dynamic registration, or from its metadata document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Client {
    pub client_id: String,
    pub client_name: Option<String>,
    pub redirect_uris: Vec<String>,
}

impl Client {
    /// Whether `uri` is one of the client's redirect URIs: exactly, or, for a loopback `http`
    /// URI, on any port (RFC 8252 section 7.3: native apps get a port at run time).
    pub fn redirect_ok(&self, uri: &str) -> bool {
        self.redirect_uris.iter().any(|registered| redirect::matches(registered, uri))
    }

    /// The client described by a client ID metadata document fetched from `client_id` (an
    /// https URL): the document must name that very URL and list its redirect URIs.
    pub fn from_metadata_document(client_id: &str, document: &Value) -> Result<Client, OAuthError> {
        let bad =
            |why: &str| OAuthError::new("invalid_client", format!("client metadata document at {client_id}: {why}"));
        if document.get("client_id").and_then(Value::as_str) != Some(client_id) {
            return Err(bad("its client_id must be the document's own URL"));
        }
        let registration: Registration = serde_json::from_value(document.clone()).map_err(|e| bad(&e.to_string()))?;
        let client = registration.into_client(client_id).map_err(|e| bad(&e.description))?;
        Ok(client)
    }
}

/// A dynamic client registration request (RFC 7591), or the same fields in a metadata document.
#[derive(Debug, Clone, Deserialize)]
pub struct Registration {
    pub redirect_uris: Vec<String>,
    pub client_name: Option<String>,
    pub token_endpoint_auth_method: Option<String>,
    pub grant_types: Option<Vec<String>>,
    pub response_types: Option<Vec<String>>,
}

impl Registration {
    /// The client it registers as `client_id`, or `invalid_redirect_uri` / `invalid_client_metadata`.
    pub fn into_client(self, client_id: &str) -> Result<Client, OAuthError> {
        if self.redirect_uris.is_empty() || self.redirect_uris.len() > REDIRECT_URIS_MAX {
            return Err(OAuthError::new(
                "invalid_redirect_uri",
                format!("give 1 to {REDIRECT_URIS_MAX} redirect_uris"),
            ));
        }
        for uri in &self.redirect_uris {
            redirect::check_registrable(uri).map_err(|why| OAuthError::new("invalid_redirect_uri", why))?;
        }
        if self.token_endpoint_auth_method.as_deref().is_some_and(|m| m != "none") {
            return Err(OAuthError::new(
                "invalid_client_metadata",
                "token_endpoint_auth_method: only \"none\" (public clients with PKCE)",
            ));
        }
        let allowed_grants = ["authorization_code", "refresh_token"];
        if self.grant_types.iter().flatten().any(|g| !allowed_grants.contains(&g.as_str())) {
            return Err(OAuthError::new(
                "invalid_client_metadata",
                "grant_types: authorization_code and refresh_token only",
            ));
        }
        if self.response_types.iter().flatten().any(|r| r != "code") {
            return Err(OAuthError::new("invalid_client_metadata", "response_types: code only"));
        }
        let client_name = self.client_name.as_deref().and_then(display_name);
        Ok(Client { client_id: client_id.to_owned(), client_name, redirect_uris: self.redirect_uris })
    }
}

/// The parameters of an authorization request (`GET /oauth/authorize`, and the consent's POST).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthRequest {
    pub response_type: String,
    pub client_id: String,
    pub redirect_uri: String,
    pub code_challenge: Option<String>,
    pub code_challenge_method: Option<String>,
    pub state: Option<String>,
    pub resource: Option<String>,
    pub scope: Option<String>,
}

impl AuthRequest {
    /// Checks the request against its client: first the redirect URI (until it is known good,
    /// errors are shown, never sent there: `Err((false, ..))`), then the rest (`Err((true, ..))`:
    /// send the error to the redirect URI).
    pub fn check(&self, client: &Client, resource_id: &str) -> Result<(), (bool, OAuthError)> {
        if !client.redirect_ok(&self.redirect_uri) {
            let why = format!("redirect_uri {} is not one client {} registered", self.redirect_uri, client.client_id);
            return Err((false, OAuthError::new("invalid_request", why)));
        }
        let fail = |error: &'static str, why: &str| Err((true, OAuthError::new(error, why)));
        if self.response_type != "code" {
            return fail("unsupported_response_type", "response_type must be code");
        }
        if self.code_challenge.as_deref().is_none_or(str::is_empty)
            || self.code_challenge_method.as_deref() != Some("S256")
        {
            return fail("invalid_request", "PKCE is required: code_challenge with code_challenge_method=S256");
        }
        if self.resource.as_deref().is_some_and(|r| r.trim_end_matches('/') != resource_id) {
            return fail("invalid_target", &format!("resource must be {resource_id}"));
        }
        if self.scope.as_deref().is_some_and(|s| s.split(' ').any(|s| !s.is_empty() && s != SCOPE)) {
            return fail("invalid_scope", &format!("the only scope is {SCOPE}"));
        }
        Ok(())
    }

    /// Where the client is sent back: its redirect URI with `params` and the state.
    pub fn redirect(&self, params: &[(&str, &str)]) -> String {
        let mut url = Url::parse(&self.redirect_uri).expect("a checked redirect URI parses");
        {
            let mut query = url.query_pairs_mut();
            for (k, v) in params {
                query.append_pair(k, v);
            }
            if let Some(state) = &self.state {
                query.append_pair("state", state);
            }
        }
        url.to_string()
    }
}

/// An authorization code as stored (under its hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeRecord {
    pub grant_id: String,
    pub client_id: String,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub resource: String,
    pub exp: u64,
    /// Set once the code was exchanged: a second exchange revokes the grant (RFC 6749 4.1.2).
    #[serde(default)]
    pub used: bool,
}

/// A code or refresh token: good for one exchange. Presented again, it revokes its grant (it
/// may have leaked: RFC 6749 section 4.1.2, OAuth 2.1 refresh token rotation).
pub trait SingleUse {
    fn spent(&self) -> bool;
    fn spend(&mut self);
    fn grant_id(&self) -> &str;
    /// When it expires, in seconds since the epoch.
    fn exp(&self) -> u64;
}

impl SingleUse for CodeRecord {
    fn spent(&self) -> bool {
        self.used
    }
    fn spend(&mut self) {
        self.used = true;
    }
    fn grant_id(&self) -> &str {
        &self.grant_id
    }
    fn exp(&self) -> u64 {
        self.exp
    }
}

impl SingleUse for TokenRecord {
    fn spent(&self) -> bool {
        self.rotated
    }
    fn spend(&mut self) {
        self.rotated = true;
    }
    fn grant_id(&self) -> &str {
        &self.grant_id
    }
    fn exp(&self) -> u64 {
        self.exp
    }
}

/// What a person consented to: a client's access to a tenant's relay session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub grant_id: String,
    pub tenant: String,
    pub session: String,
    pub client_id: String,
    pub resource: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenKind {
    Access,
    Refresh,
}

/// A token as stored (under its hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    pub kind: TokenKind,
    pub grant_id: String,
    pub client_id: String,
    /// The audience: the resource the token may be used at.
    pub resource: String,
    pub exp: u64,
    /// A refresh token that was exchanged already: presenting it again revokes the grant.
    #[serde(default)]
    pub rotated: bool,
}

impl TokenRecord {
    /// Whether this access token may be used at `resource_id` at `now_s`.
    pub fn check_access(&self, resource_id: &str, now_s: u64) -> Result<(), String> {
        match () {
            _ if self.kind != TokenKind::Access => Err("that is a refresh token: send the access token".into()),
            _ if now_s >= self.exp => Err("the access token expired: refresh it".into()),
            _ if self.resource != resource_id => {
                Err(format!("the access token is for {}, not this resource ({resource_id})", self.resource))
            }
            _ => Ok(()),
        }
    }
}

/// A token request (`application/x-www-form-urlencoded`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TokenRequest {
    pub grant_type: String,
    pub code: Option<String>,
    pub redirect_uri: Option<String>,
    pub client_id: Option<String>,
    pub code_verifier: Option<String>,
    pub refresh_token: Option<String>,
    pub resource: Option<String>,
}

impl TokenRequest {
    /// Checks an `authorization_code` request against the code it names.
    pub fn check_code(&self, code: &CodeRecord, resource_id: &str, now_s: u64) -> Result<(), OAuthError> {
        let grant = |why: &str| Err(OAuthError::new("invalid_grant", why));
        if code.used {
            return grant("the authorization code was used already; the tokens issued for it are revoked");
        }
        if now_s >= code.exp {
            return grant("the authorization code expired: authorize again");
        }
        if self.client_id.as_deref() != Some(code.client_id.as_str()) {
            return grant("the code was issued to another client_id");
        }
        if self.redirect_uri.as_deref() != Some(code.redirect_uri.as_str()) {
            return grant("redirect_uri must be the one of the authorization request");
        }
        self.check_resource(resource_id)?;
        verify_pkce(self.code_verifier.as_deref().unwrap_or(""), &code.code_challenge)
    }

    /// Checks a `refresh_token` request against the token it presents.
    pub fn check_refresh(&self, token: &TokenRecord, resource_id: &str, now_s: u64) -> Result<(), OAuthError> {
        let grant = |why: &str| Err(OAuthError::new("invalid_grant", why));
        if token.kind != TokenKind::Refresh {
            return grant("that is not a refresh token");
        }
        if token.rotated {
            return grant("the refresh token was used already; its grant is revoked: authorize again");
        }
        if now_s >= token.exp {
            return grant("the refresh token expired: authorize again");
        }
        // A public client proves nothing but its client_id: without it, anyone holding a
        // leaked refresh token could use it (OAuth 2.1 section 4.3.1 requires it).
        match self.client_id.as_deref() {
            None => return Err(OAuthError::new("invalid_request", "client_id is required: send the client's own")),
            Some(c) if c != token.client_id => return grant("the refresh token was issued to another client_id"),
            Some(_) => {}
        }
        self.check_resource(resource_id)
    }

    fn check_resource(&self, resource_id: &str) -> Result<(), OAuthError> {
        match &self.resource {
            Some(r) if r.trim_end_matches('/') != resource_id => {
                Err(OAuthError::new("invalid_target", format!("resource must be {resource_id}")))
            }
            _ => Ok(()),
        }
    }
}
