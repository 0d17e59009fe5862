//! `relay-capsule`: the pure capsule core from the command line, so tests and operators can
//! sign and verify capsules outside the Worker.
//!
//! ```text
//! relay-capsule sign <seed>     stdin: run_js/run_py arguments plus "language"; stdout: capsule.json
//! relay-capsule verify <jwks>   stdin: capsule.json; stdout: its hash (exit 1 and the reason if invalid)
//! relay-capsule run-token <seed> <tenant> <session> <run> <capsule hash> <ttl s>
//!                               stdout: a run token (for /egress and /files) valid for ttl seconds
//! relay-capsule upload-grant <seed> <tenant> <session> <run> <sha256> <size> <age s>
//!                               stdout: an upload grant for the run's deps layer, issued age seconds ago
//! relay-capsule download-url <seed> <tenant> <run> <path> <exp>
//!                               stdout: the signed download URL (path and query) of a run's /out file
//! relay-capsule keygen          stdout: a new signing seed for `wrangler secret put CAPSULE_SIGNING_KEY`
//! relay-capsule error-names     stdout: the error table the executor page reads (crate::error)
//! relay-capsule tab-commands    stdout: the commands a tab may get (crate::protocol)
//! relay-capsule audit-verify  stdin: exported audit records (a JSON array or NDJSON, oldest first);
//!                               stdout: `ok: N records, head <seq> <chain>` (exit 1 and `broken at seq N: why`)
//! relay-capsule workspace-root stdin: a workspace listing (`relay://workspace`, a JSON array or
//!                               NDJSON of `{path, sha256, size}`); stdout: its root hash (docs/ARCHITECTURE.md)
//! relay-capsule default-limits  stdout: the run limits a manifest without its own gets (policy::Limits)
//! relay-capsule exit-fields     stdout: the fields a tab's exit event may carry (run::backchannel)
//! relay-capsule deploy-check [max gzip KiB]  stdin: `wrangler deploy --dry-run`'s output; stdout: the
//!                               bundle's sizes (exit 1 naming each missing binding or the size past the bound)
//! ```

use relay_core::audit;
use relay_core::auth::RunClaims;
use relay_core::capsule::jws::{b64url, generate_seed, KeySet, Signer};
use relay_core::capsule::{build_capsule, capsule_hash, verify_manifest};
use relay_core::packages::grant::RunRef;
use relay_core::packages::UploadGrant;
use relay_core::policy::{Limits, Policy};
use relay_core::run::args::capsule_spec;
use std::io::{Read, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["sign", seed] => sign(seed),
        ["verify", jwks] => verify(jwks),
        ["run-token", seed, tenant, session, run, capsule, ttl] => {
            run_token(seed, [tenant, session, run, capsule], ttl)
        }
        ["upload-grant", seed, tenant, session, run, sha256, size, age] => {
            upload_grant(seed, [tenant, session, run, sha256], [size, age])
        }
        ["download-url", seed, tenant, run, path, exp] => download_url(seed, [tenant, run, path], exp),
        ["keygen"] => Ok(b64url(&generate_seed()).into_bytes()),
        ["error-names"] => Ok(relay_core::error::table_json().to_string().into_bytes()),
        ["tab-commands"] => Ok(relay_core::protocol::tab_commands_json().to_string().into_bytes()),
        ["audit-verify"] => audit_verify(),
        ["workspace-root"] => workspace_root(),
        ["default-limits"] => serde_json::to_vec(&Limits::default()).map_err(|e| e.to_string()),
        ["deploy-check"] => deploy_check(None),
        ["deploy-check", max] => deploy_check(Some(max)),
        ["exit-fields"] => Ok(relay_core::run::backchannel::exit_fields().to_string().into_bytes()),
        _ => Err("usage: relay-capsule sign <seed> | verify <jwks.json> | run-token <seed> <tenant> <session> <run> \
             <capsule hash> <ttl s> | upload-grant <seed> <tenant> <session> <run> <sha256> <size> <age s> | download-url <seed> <tenant> <run> <path> <exp> | keygen | error-names | audit-verify | workspace-root | default-limits | exit-fields | tab-commands | deploy-check [max gzip KiB]"
            .into()),
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

/// Verifies an export of `relay://audit` records from the oldest one's own `prev` on.
fn audit_verify() -> Result<Vec<u8>, String> {
    let text = String::from_utf8(stdin()?).map_err(|_| "the export is not UTF-8".to_string())?;
    let records = audit::parse_export(&text)?;
    let head = audit::verify(&records, None).map_err(|broken| broken.to_string())?;
    Ok(format!("ok: {} records, head {} {}\n", records.len(), head.seq, head.chain).into_bytes())
}

/// The root hash of a saved workspace listing, to compare with the audit's.
fn workspace_root() -> Result<Vec<u8>, String> {
    let text = String::from_utf8(stdin()?).map_err(|_| "the listing is not UTF-8".to_string())?;
    Ok(format!("{}\n", relay_core::workspace::root_of_listing(&text)?).into_bytes())
}

/// Judges a dry run's output (`relay_core::deploy`) against the bound, `max` KiB gzipped if given.
fn deploy_check(max: Option<&str>) -> Result<Vec<u8>, String> {
    use relay_core::deploy;
    let max = match max {
        Some(max) => max.parse::<f64>().map_err(|_| format!("max gzip KiB {max:?} is not a number"))?,
        None => deploy::BUNDLE_MAX_GZIP_KIB,
    };
    let output = String::from_utf8_lossy(&stdin()?).into_owned();
    let run = deploy::parse(&output)?;
    let sizes =
        format!("bundle: {:.2} KiB raw, {:.2} KiB gzipped (bound {max} KiB gzipped)", run.raw_kib, run.gzip_kib);
    deploy::check(&run, max).map_err(|problems| format!("{sizes}\n{}", problems.join("\n")))?;
    Ok(format!("{sizes}; bindings: {} present\n", deploy::BINDINGS.len()).into_bytes())
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

fn run_token(seed: &str, [tenant, session, run, capsule]: [&str; 4], ttl: &str) -> Result<Vec<u8>, String> {
    let signer = Signer::from_base64url_seed(seed).map_err(|e| e.to_string())?;
    let ttl = number("ttl", ttl)?;
    Ok(RunClaims::new(tenant, session, run, capsule, now_s()?, ttl).sign(&signer).into_bytes())
}

fn upload_grant(
    seed: &str,
    [tenant, session, run, sha256]: [&str; 4],
    [size, age]: [&str; 2],
) -> Result<Vec<u8>, String> {
    let signer = Signer::from_base64url_seed(seed).map_err(|e| e.to_string())?;
    let run_ref = RunRef { tenant: tenant.into(), session: session.into(), run: run.into() };
    let issued = now_s()?.saturating_sub(number("age", age)?);
    let jti = format!("g_cli_{issued}");
    Ok(UploadGrant::new(&run_ref, "deps", sha256, number("size", size)?, issued, jti).sign(&signer).into_bytes())
}

fn number(name: &str, value: &str) -> Result<u64, String> {
    value.parse().map_err(|e| format!("{name} {value:?}: {e}"))
}

fn now_s() -> Result<u64, String> {
    Ok(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_err(|e| e.to_string())?.as_secs())
}

fn download_url(seed: &str, [tenant, run, path]: [&str; 3], exp: &str) -> Result<Vec<u8>, String> {
    let signer = Signer::from_base64url_seed(seed).map_err(|e| e.to_string())?;
    let exp = number("exp", exp)?;
    Ok(relay_core::files::sign_download(&signer, tenant, run, path, exp).into_bytes())
}
