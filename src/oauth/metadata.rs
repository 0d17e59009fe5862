//! The discovery documents: protected resource metadata (RFC 9728), authorization server
//! metadata (RFC 8414), and the `WWW-Authenticate` challenge of a 401 from `/mcp`.

use serde_json::{json, Value};

use super::SCOPE;

/// The protected resource's identifier, which access tokens are bound to: the `/mcp` URL.
pub fn resource_id(origin: &str) -> String {
    format!("{origin}/mcp")
}

/// Where the protected resource metadata of `/mcp` is (RFC 9728 section 3.1: the well-known
/// path with the resource's path appended).
pub fn resource_metadata_url(origin: &str) -> String {
    format!("{origin}/.well-known/oauth-protected-resource/mcp")
}

pub fn protected_resource_metadata(origin: &str) -> Value {
    json!({
        "resource": resource_id(origin),
        "authorization_servers": [origin],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": "relay-edge",
    })
}

pub fn authorization_server_metadata(origin: &str) -> Value {
    json!({
        "issuer": origin,
        "authorization_endpoint": format!("{origin}/oauth/authorize"),
        "token_endpoint": format!("{origin}/oauth/token"),
        "registration_endpoint": format!("{origin}/oauth/register"),
        "revocation_endpoint": format!("{origin}/oauth/revoke"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": [SCOPE],
        "client_id_metadata_document_supported": true,
    })
}

/// The challenge of a 401 from `/mcp`: where to find how to get a token.
pub fn www_authenticate(origin: &str, error: Option<&str>) -> String {
    let mut challenge = format!("Bearer realm=\"relay-edge\", resource_metadata=\"{}\"", resource_metadata_url(origin));
    if let Some(error) = error {
        challenge.push_str(&format!(", error=\"{error}\""));
    }
    challenge
}
