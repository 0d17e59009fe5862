//! `relay-capsule`: the pure capsule core from the command line, so tests and operators can
//! sign and verify capsules outside the Worker.
//!
//! ```text
//! relay-capsule sign <seed>     stdin: run_js/run_py arguments plus "language"; stdout: capsule.json
//! relay-capsule verify <jwks>   stdin: capsule.json; stdout: its hash (exit 1 and the reason if invalid)
//! relay-capsule keygen          stdout: a new signing seed for `wrangler secret put CAPSULE_SIGNING_KEY`
//! relay-capsule error-names     stdout: the error table the executor page reads (crate::error)
//! relay-capsule default-limits  stdout: the run limits a manifest without its own gets (policy::Limits)
//! ```

use relay_core::capsule::jws::{b64url, generate_seed, KeySet, Signer};
use relay_core::capsule::{build_capsule, capsule_hash, verify_manifest};
use relay_core::policy::{Limits, Policy};
use relay_core::run::args::capsule_spec;
use std::io::{Read, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["sign", seed] => sign(seed),
        ["verify", jwks] => verify(jwks),
        ["keygen"] => Ok(b64url(&generate_seed()).into_bytes()),
        ["error-names"] => Ok(relay_core::error::table_json().to_string().into_bytes()),
        ["default-limits"] => serde_json::to_vec(&Limits::default()).map_err(|e| e.to_string()),
        _ => {
            Err("usage: relay-capsule sign <seed> | verify <jwks.json> | keygen | error-names | default-limits".into())
        }
    };
    match result {
        Ok(out) => {
            std::io::stdout().write_all(&out).expect("stdout");
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("relay-capsule: {why}");
            ExitCode::FAILURE
        }
    }
}

fn stdin() -> Result<Vec<u8>, String> {
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input).map_err(|e| e.to_string())?;
    Ok(input)
}

fn sign(seed: &str) -> Result<Vec<u8>, String> {
    let signer = Signer::from_base64url_seed(seed).map_err(|e| e.to_string())?;
    let request: serde_json::Value = serde_json::from_slice(&stdin()?).map_err(|e| e.to_string())?;
    let language = request.get("language").and_then(|l| l.as_str()).unwrap_or_default();
    let spec = capsule_spec(language, &request, &Policy::default()).map_err(|e| e.message)?;
    let capsule = build_capsule(spec, &signer).map_err(|e| e.to_string())?;
    Ok(capsule.manifest_json)
}

fn verify(jwks_path: &str) -> Result<Vec<u8>, String> {
    let jwks = std::fs::read(jwks_path).map_err(|e| format!("{jwks_path}: {e}"))?;
    let jwks = serde_json::from_slice(&jwks).map_err(|e| e.to_string())?;
    let keys = KeySet::from_jwks(&jwks).map_err(|e| e.to_string())?;
    let manifest = verify_manifest(&stdin()?, &keys).map_err(|e| e.to_string())?;
    Ok(capsule_hash(&manifest).map_err(|e| e.to_string())?.into_bytes())
}
