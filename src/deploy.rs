//! The deploy check: what `wrangler deploy --dry-run` must show before a deploy may go ahead.
//! The bindings the Worker reads (named once here; `durable/src/platform/bindings.rs` takes its
//! names from this table) must all be configured, each of the kind the Worker uses, and the
//! bundle must stay under [`BUNDLE_MAX_GZIP_KIB`]. `scripts/deploy-check.sh` runs the dry run
//! and hands its output to `relay-capsule deploy-check`, which is [`check`].

use crate::protocol::SESSIONS_BINDING;

/// R2: capsules, layers, build records, `/out` files, workspace bodies (`crate::keys`).
pub const R2_CAPSULES: &str = "R2_CAPSULES";
/// KV: tenants, upstream servers, relay sessions, OAuth (`crate::keys`).
pub const KV_CONFIG: &str = "KV_CONFIG";
/// The page's static assets.
pub const ASSETS: &str = "ASSETS";
/// The rate limiter of OAuth client registration.
pub const OAUTH_REGISTER: &str = "OAUTH_REGISTER";
/// The tenants' ledgers (`crate::quota`), one Durable Object per tenant.
pub const LEDGERS: &str = "LEDGERS";
/// The Worker Loader the edge executor makes each run's dynamic Worker with (read by
/// `durable/js/entry.mjs`).
pub const LOADER: &str = "LOADER";

/// Every binding the Worker reads, with the kind wrangler lists it as in a dry run's table.
pub const BINDINGS: [(&str, &str); 7] = [
    (SESSIONS_BINDING, "Durable Object"),
    (LEDGERS, "Durable Object"),
    (KV_CONFIG, "KV Namespace"),
    (R2_CAPSULES, "R2 Bucket"),
    (OAUTH_REGISTER, "Rate Limit"),
    (ASSETS, "Assets"),
    (LOADER, "Worker Loader"),
];

/// The largest gzipped bundle (the Worker's script and wasm, as wrangler counts it) a deploy
/// may ship: 1.5 MiB. It was 1,146 KiB on 2026-11-25 (1,031 KiB when issue 31 was filed), 1,187
/// KiB with the tenant routes and retention, 1,244 KiB with the edge executor's runner (its wasm
/// files are read from the page's assets, not bundled: they would have added 456 KiB), so this leaves about 350 KiB for growth while
/// catching a heavy new dependency at once; and it
/// stays at half of the 3 MiB Cloudflare's free plan accepts (the paid plan takes 10 MiB), so a
/// deploy is never first refused by Cloudflare.
pub const BUNDLE_MAX_GZIP_KIB: f64 = 1536.0;

/// What a dry run showed: the bundle's sizes (KiB, as wrangler prints them) and the bindings.
#[derive(Debug, Clone, PartialEq)]
pub struct DryRun {
    pub raw_kib: f64,
    pub gzip_kib: f64,
    /// `(name, kind)` of each binding wrangler listed.
    pub bindings: Vec<(String, String)>,
}

/// Reads wrangler's dry-run output: the `Total Upload: <raw> KiB / gzip: <gzip> KiB` line and
/// the binding table's `env.<NAME> (<resource>)   <kind>` rows. Output without the size line
/// is an error (a wrangler that prints otherwise must fail the check, not pass it).
pub fn parse(output: &str) -> Result<DryRun, String> {
    let sizes = output.lines().find_map(|line| line.trim().strip_prefix("Total Upload:").map(sizes));
    let Some(Some((raw_kib, gzip_kib))) = sizes else {
        return Err("wrangler's dry run printed no `Total Upload: <n> KiB / gzip: <n> KiB` line: \
                    did it fail, or print its sizes otherwise? (see its output above)"
            .into());
    };
    Ok(DryRun { raw_kib, gzip_kib, bindings: output.lines().filter_map(binding_row).collect() })
}

/// `3110.37 KiB / gzip: 1146.37 KiB` -> (3110.37, 1146.37).
fn sizes(rest: &str) -> Option<(f64, f64)> {
    let (raw, gzip) = rest.split_once("/ gzip:")?;
    let kib = |s: &str| s.trim().strip_suffix("KiB")?.trim().parse::<f64>().ok().filter(|n| n.is_finite() && *n >= 0.0);
    Some((kib(raw)?, kib(gzip)?))
}

/// `env.KV_CONFIG (0000)      KV Namespace` -> ("KV_CONFIG", "KV Namespace"); the resource in
/// parentheses is optional (`env.ASSETS   Assets`).
fn binding_row(line: &str) -> Option<(String, String)> {
    let rest = line.trim().strip_prefix("env.")?;
    let end = rest.find(|c: char| c.is_whitespace())?;
    let (name, rest) = rest.split_at(end);
    let rest = rest.trim_start();
    let kind = match rest.strip_prefix('(') {
        Some(inner) => &inner[inner.rfind(')')? + 1..],
        None => rest,
    };
    let kind = kind.trim();
    (!name.is_empty() && !kind.is_empty()).then(|| (name.to_owned(), kind.to_owned()))
}

/// Judges a dry run: every one of [`BINDINGS`] listed with its kind, and the gzipped bundle at
/// most `max_gzip_kib`. Every problem is named, each with what to change.
pub fn check(run: &DryRun, max_gzip_kib: f64) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    for (name, kind) in BINDINGS {
        match run.bindings.iter().find(|(listed, _)| listed == name) {
            None => problems
                .push(format!("binding {name} ({kind}) is missing: the Worker reads it; add it to wrangler.toml")),
            Some((_, listed)) if listed != kind => problems.push(format!(
                "binding {name} is a {listed}, the Worker reads a {kind}: fix its section in wrangler.toml"
            )),
            Some(_) => {}
        }
    }
    if run.gzip_kib > max_gzip_kib {
        problems.push(format!(
            "the bundle is {:.2} KiB gzipped, over the bound of {max_gzip_kib} KiB \
             (relay_core::deploy::BUNDLE_MAX_GZIP_KIB): shrink it, or raise the bound saying why",
            run.gzip_kib
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}
