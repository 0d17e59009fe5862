//! The commands a relay session's DO sends a tab on its command stream (SSE), one variant each,
//! serialized here only. `relay-capsule tab-commands` prints [`CommandName::ALL`] for the page
//! (`relay-tab-commands`, at build time), so the page knows exactly these.

use serde::Serialize;
use serde_json::{json, Value};

use crate::auth::{run_token_ttl_s, AttachClaims, RunClaims};
use crate::capsule::jws::Signer;
use crate::capsule::{inline_files, Capsule, CapsuleSpec, Language};
use crate::mcp::sse_frame;
use crate::packages::{DepsRequest, PackageSources};
use crate::protocol::Caller;
use crate::relay_session::tab_sync::WorkspaceDelta;
use crate::run::machine::{Outcome, LOAD_BUDGET_MS};

/// A command for a tab.
#[derive(Debug, Clone, PartialEq)]
pub enum TabCommand {
    /// The first event of a stream: the tab's id, its relay session, how long its lease lasts
    /// unrenewed.
    Hello { tab_id: String, session: String, lease_ms: u64 },
    /// How many tabs are attached, and which gets the next run (sent whenever that changes).
    Tabs(TabsCommand),
    /// Run a signed capsule.
    Capsule(CapsuleCommand),
    /// Build a run's dependencies into a deps layer first.
    Build(BuildCommand),
    /// Stop this run.
    Cancel { run_id: String },
    /// A run of the relay session that ran elsewhere (at the edge) ended: for the page's list.
    Ran(RanCommand),
}

/// The names of the commands, for the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandName {
    Hello,
    Tabs,
    Capsule,
    Build,
    Cancel,
    Ran,
}

impl CommandName {
    pub const ALL: [CommandName; 6] = [
        CommandName::Hello,
        CommandName::Tabs,
        CommandName::Capsule,
        CommandName::Build,
        CommandName::Cancel,
        CommandName::Ran,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CommandName::Hello => "hello",
            CommandName::Tabs => "tabs",
            CommandName::Capsule => "capsule",
            CommandName::Build => "build",
            CommandName::Cancel => "cancel",
            CommandName::Ran => "ran",
        }
    }

    /// Whether the command starts a run (its copy also comes on the tab's results socket).
    pub fn starts_run(self) -> bool {
        matches!(self, CommandName::Capsule | CommandName::Build)
    }
}

/// What the page reads: `{commands: [...], runCommands: [...]}`.
pub fn table_json() -> Value {
    let names = |keep: fn(CommandName) -> bool| -> Vec<&str> {
        CommandName::ALL.into_iter().filter(|c| keep(*c)).map(CommandName::as_str).collect()
    };
    json!({ "commands": names(|_| true), "runCommands": names(CommandName::starts_run) })
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TabsCommand {
    pub count: usize,
    pub next: Option<String>,
}

/// The `ran` command's data: a run the page did not execute (one at the edge), as its list shows
/// one: what ran where, how it ended, and the start of its output (the page keeps no more).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RanCommand {
    pub run_id: String,
    pub tool: &'static str,
    pub language: Language,
    pub executor: &'static str,
    /// When it was sent to its executor and how long it ran, in ms.
    pub started_at: u64,
    pub wall_ms: u64,
    pub exit_code: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    pub stdout: String,
    pub stderr: String,
}

/// The characters of each output stream a `ran` command carries: what the page's list keeps.
pub const RAN_OUTPUT_CHARS: usize = 16 * 1024;

impl RanCommand {
    /// Run `run` of `language` that ended on `executor` at `now_ms` as `outcome`.
    pub fn new(run: &str, language: Language, outcome: &Outcome, now_ms: u64) -> Self {
        let exit = &outcome.exit;
        let head = |text: &str| text.chars().take(RAN_OUTPUT_CHARS).collect::<String>();
        RanCommand {
            run_id: run.to_owned(),
            tool: language.tool_name(),
            language,
            executor: outcome.executor.unwrap_or("tab"),
            started_at: now_ms.saturating_sub(exit.usage.wall_ms),
            wall_ms: exit.usage.wall_ms,
            exit_code: exit.exit_code,
            error: exit.error.as_ref().map(|e| json!({ "name": e.name, "message": e.message })),
            stdout: head(&outcome.stdout),
            stderr: head(&outcome.stderr),
        }
    }
}

/// The `capsule` command's data: the capsule, its small files inline, and two tokens (sent
/// as `Authorization: Bearer`): one that only reads this tenant's capsule files, and the run's
/// own, for its fetches through `/egress` and its `/out` uploads.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CapsuleCommand {
    pub run_id: String,
    pub hash: String,
    pub language: Language,
    pub size: u64,
    pub manifest_url: String,
    pub token: String,
    pub run_token: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inline: Option<Value>,
    /// The context the run names: the tab runs it in that context's interpreter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextOrder>,
    /// The workspace's changes since the version the tab was last given, when the relay session
    /// knows it and they are few (`relay_session::tab_sync`): the tab then need not ask.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceDelta>,
}

/// What the tab is told of a run's context (`run::contexts`): its name, whether to throw away
/// an interpreter it holds under that name first, and how long an unused one may be kept.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextOrder {
    pub name: String,
    pub fresh: bool,
    pub idle_ms: u64,
}

impl CapsuleCommand {
    /// The command for run `run` of `caller` at `now_s`. The run token lives as long as the
    /// run may wait in line, load and run, and then upload.
    pub fn new(signer: &Signer, caller: &Caller, run: &str, capsule: &Capsule, now_s: u64) -> Self {
        let claims = AttachClaims::new(&caller.tenant.id, &caller.session, now_s, format!("cap_{run}"));
        let wait_ms = caller.tenant.defaults.queue.max_wait_ms;
        let lifetime_ms = wait_ms + LOAD_BUDGET_MS + capsule.manifest.policy.limits.timeout_ms;
        let run_claims =
            RunClaims::new(&caller.tenant.id, &caller.session, run, &capsule.hash, now_s, run_token_ttl_s(lifetime_ms));
        let size: u64 =
            capsule.manifest.fs_layers.iter().map(|layer| layer.size).sum::<u64>() + capsule.manifest_json.len() as u64;
        CapsuleCommand {
            run_id: run.to_owned(),
            hash: capsule.hash.clone(),
            language: capsule.manifest.language,
            size,
            manifest_url: format!("/capsules/{}/capsule.json", capsule.hash),
            token: claims.sign_for_capsule_files(signer),
            run_token: run_claims.sign(signer),
            inline: inline_files(capsule),
            context: None,
            workspace: None,
        }
    }
}

/// The `build` command's data: the dependencies to build, where to get them, and a run token
/// (naming no capsule yet) for `/registry`, `/capsule/presign` and `/capsule/finalize`, which
/// answers with the `capsule` command's data.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildCommand {
    pub run_id: String,
    pub language: Language,
    pub build: DepsRequest,
    pub sources: PackageSources,
    pub run_token: String,
}

impl BuildCommand {
    pub fn new(
        signer: &Signer,
        caller: &Caller,
        run: &str,
        spec: &CapsuleSpec,
        request: &DepsRequest,
        now_s: u64,
    ) -> Self {
        let claims =
            RunClaims::new(&caller.tenant.id, &caller.session, run, "", now_s, run_token_ttl_s(LOAD_BUDGET_MS));
        BuildCommand {
            run_id: run.to_owned(),
            language: spec.language,
            build: request.clone(),
            sources: caller.tenant.defaults.packages.clone(),
            run_token: claims.sign(signer),
        }
    }
}

impl TabCommand {
    pub fn name(&self) -> CommandName {
        match self {
            TabCommand::Hello { .. } => CommandName::Hello,
            TabCommand::Tabs(_) => CommandName::Tabs,
            TabCommand::Capsule(_) => CommandName::Capsule,
            TabCommand::Build(_) => CommandName::Build,
            TabCommand::Cancel { .. } => CommandName::Cancel,
            TabCommand::Ran(_) => CommandName::Ran,
        }
    }

    /// The command's data, as the page reads it.
    pub fn data(&self) -> Value {
        let data = match self {
            TabCommand::Hello { tab_id, session, lease_ms } => {
                Ok(json!({ "tabId": tab_id, "session": session, "leaseMs": lease_ms }))
            }
            TabCommand::Tabs(tabs) => serde_json::to_value(tabs),
            TabCommand::Capsule(capsule) => serde_json::to_value(capsule),
            TabCommand::Build(build) => serde_json::to_value(build),
            TabCommand::Cancel { run_id } => Ok(json!({ "runId": run_id })),
            TabCommand::Ran(ran) => serde_json::to_value(ran),
        };
        data.expect("a tab command serializes")
    }

    /// The command as an SSE event on the tab's stream.
    pub fn frame(&self) -> Vec<u8> {
        sse_frame(self.name().as_str(), &self.data(), None).into_bytes()
    }
}
