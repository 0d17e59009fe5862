//! The resolver of a `run_py` call's `pip` dependencies: which wheel of which release of each
//! project, following every wheel's `Requires-Dist` and the lock's `depends`, for the runtime
//! the capsule runs in.
//!
//! It does no I/O. [`resolve`] takes what is known so far (the call's requirements, the runtime,
//! the Pyodide lock, the index's project documents and the METADATA of wheels fetched) and
//! answers one [`Step`]: what to fetch next, the finished install list, or why it failed. The
//! build worker fetches what it asks for and calls it again with more known, until it is done;
//! each call resolves from the start, so the answer depends only on what is known.
//!
//! A pass that meets something unknown does not stop there: the requirements already queued at
//! that moment are met exactly as a pass knowing everything would meet them (what the unknown
//! would add comes after them), so it goes on through those, collecting everything else they
//! need, and asks for all of it at once: one round of fetches per level of the tree.
//!
//! The rules, in order:
//! - Breadth first from the call's requirements (and `wheelUrls`, taken as given), each
//!   project picked once, when it is first required: the highest release that fits every range
//!   required of it so far and has a wheel this runtime installs (the best-ranked tag when it
//!   has several). Pre-releases only when a range names one or nothing else fits; yanked files
//!   only when pinned with `==`; a file whose `requires_python` excludes the runtime is skipped.
//! - The tenant's index comes first. Pyodide's distribution (the lock) serves a project the index
//!   has no fitting wheel for (numpy, pandas: compiled for this runtime) or does not have, and
//!   every dependency its lock lists for a package it serves.
//! - A later range that the pick does not fit is a conflict. If some release fits every range,
//!   resolution starts again with all of them known from the start (at most
//!   [`MAX_RESTARTS`] times); otherwise it fails naming each requirer and its range.
//! - A requirement that leads back to a project on its own chain is a cycle, refused naming
//!   the chain (a project asking for its own extras is not); a chain deeper than [`MAX_DEPTH`]
//!   or more than [`MAX_PACKAGES`] projects are refused too.

use super::lock::{Lock, LockPackage};
use super::metadata::CoreMetadata;
use super::name::canonical_name;
use super::requirement::Requirement;
use super::runtime::{LockInfo, Runtime};
use super::version::{SpecifierSet, Version};
use super::wheel::{needed_tags, WheelName};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The longest requirement chain followed (the call's requirements are at depth 0).
pub const MAX_DEPTH: usize = 24;
/// Most projects one build installs.
pub const MAX_PACKAGES: usize = 200;
/// Most fresh starts after a conflict that some release could settle.
pub const MAX_RESTARTS: usize = 8;

/// What is known so far.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Known {
    pub requirements: Vec<String>,
    #[serde(default)]
    pub wheel_urls: Vec<String>,
    /// The runtime's own lock `info` (the one shipped with its Pyodide).
    pub runtime: LockInfo,
    /// The lock whose packages may be used: the runtime's own, or the tenant's `pyodideLock`.
    pub lock: serde_json::Value,
    /// Where that lock came from, for messages.
    pub lock_source: String,
    /// The base URL its files are under (`defaults.packages.pyodideIndex`).
    pub pyodide_index: String,
    /// The index's document of each project asked for, by canonical name; `null` when the index
    /// has no such project (it answered 404).
    #[serde(default)]
    pub projects: BTreeMap<String, Option<IndexProject>>,
    /// The METADATA of each wheel asked for, by its URL.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// A project's document as PyPI's JSON API gives it (`/pypi/<project>/json`), what is read of it.
#[derive(Debug, Deserialize)]
pub struct IndexProject {
    pub info: ProjectInfo,
    pub releases: BTreeMap<String, Vec<IndexFile>>,
}

#[derive(Debug, Deserialize)]
pub struct ProjectInfo {
    pub name: String,
}

#[derive(Debug, Deserialize)]
pub struct IndexFile {
    pub filename: String,
    /// Absolute (the build worker resolves a relative one against the page that listed it).
    pub url: String,
    #[serde(default)]
    pub digests: Digests,
    #[serde(default)]
    pub yanked: bool,
    #[serde(default)]
    pub requires_python: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Digests {
    pub sha256: Option<String>,
}

/// The resolver's answer.
#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub enum Step {
    /// Fetch these and call again: project documents from the index (by canonical name), and
    /// wheels whose METADATA is needed.
    Fetch {
        projects: Vec<String>,
        wheels: Vec<WheelFile>,
    },
    /// Install these, in this order.
    Done {
        install: Vec<Install>,
    },
    Failed {
        message: String,
    },
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct WheelFile {
    pub url: String,
    pub filename: String,
    /// The digest to check the download against (`None`: a `wheelUrls` entry, taken as given).
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Install {
    pub project: String,
    pub version: String,
    #[serde(flatten)]
    pub file: WheelFile,
    /// `index`, `lock` or `url`.
    pub source: &'static str,
    /// Where the deps layer keeps it (`wheels/<file>`, `wheels/dynlib/<file>`).
    pub layer_path: String,
}

/// Resolves as far as `known` allows.
pub fn resolve(known: &Known) -> Step {
    match World::new(known) {
        Ok(world) => world.resolve(),
        Err(message) => Step::Failed { message },
    }
}

/// What every pass reads: the known facts and the runtime they are judged for.
struct World<'a> {
    known: &'a Known,
    runtime: Runtime,
    tags: Vec<(String, String, String)>,
    env: super::marker::Environment,
    lock: Lock,
}

/// Who required something, and how (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Constraint {
    requirer: String,
    /// The requirement as written (without its marker), or `name (from the lock)`.
    text: String,
    specifiers: String,
}

enum Outcome {
    Step(Step),
    Restart(String, Vec<Constraint>),
}

impl<'a> World<'a> {
    fn new(known: &'a Known) -> Result<World<'a>, String> {
        let runtime = Runtime::new(known.runtime.clone())?;
        let lock = Lock::parse(&known.lock).map_err(|why| format!("the Pyodide lock {}: {why}", known.lock_source))?;
        if let Some(why) = runtime.refuses(&lock.info) {
            return Err(format!(
                "the Pyodide lock {} cannot serve this runtime: {why}; name a lock of this Pyodide version in defaults.packages.pyodideLock, or none",
                known.lock_source
            ));
        }
        Ok(World { known, tags: runtime.tags(), env: runtime.environment(), runtime, lock })
    }

    fn resolve(&self) -> Step {
        let mut seeds: BTreeMap<String, Vec<Constraint>> = BTreeMap::new();
        for _ in 0..=MAX_RESTARTS {
            match Pass::new(self, &seeds).run() {
                Outcome::Step(step) => return step,
                Outcome::Restart(key, constraints) => {
                    seeds.insert(key, constraints);
                }
            }
        }
        Step::Failed {
            message: format!(
                "the requirements did not settle after {MAX_RESTARTS} fresh starts; pin the projects named in conflicts"
            ),
        }
    }
}

/// Where a pick's file comes from.
#[derive(Debug, Clone)]
enum Source {
    Index(WheelFile),
    Url(WheelFile),
    Lock(LockPackage),
}

#[derive(Debug, Clone)]
struct Pick {
    name: String,
    version: Version,
    source: Source,
    extras: Vec<String>,
    /// The chain that led here, this project last.
    path: Vec<String>,
    /// Its first requirer's constraint.
    by: Constraint,
}

impl Pick {
    fn label(&self) -> String {
        match self.source {
            Source::Lock(_) => format!("{} {} (Pyodide's distribution)", self.name, self.version),
            _ => format!("{} {}", self.name, self.version),
        }
    }
}

#[derive(Debug, Clone)]
enum Demand {
    /// A requirement of the call or of a wheel's METADATA.
    Requirement { requirement: Requirement, requirer: String, path: Vec<String> },
    /// A dependency the lock lists for a package it serves.
    LockDependency { name: String, requirer: String, path: Vec<String> },
}

impl Demand {
    fn key(&self) -> String {
        match self {
            Demand::Requirement { requirement, .. } => requirement.key(),
            Demand::LockDependency { name, .. } => canonical_name(name),
        }
    }

    fn path(&self) -> &[String] {
        match self {
            Demand::Requirement { path, .. } | Demand::LockDependency { path, .. } => path,
        }
    }

    fn constraint(&self) -> Constraint {
        match self {
            Demand::Requirement { requirement, requirer, .. } => Constraint {
                requirer: requirer.clone(),
                text: requirement.to_string(),
                specifiers: requirement.specifiers.to_string(),
            },
            Demand::LockDependency { name, requirer, .. } => Constraint {
                requirer: requirer.clone(),
                text: format!("{name} (any version, from the lock)"),
                specifiers: String::new(),
            },
        }
    }
}

/// One resolution from the start.
struct Pass<'w, 'a> {
    world: &'w World<'a>,
    seeds: &'w BTreeMap<String, Vec<Constraint>>,
    picks: BTreeMap<String, Pick>,
    order: Vec<String>,
    constraints: BTreeMap<String, Vec<Constraint>>,
    queue: VecDeque<Demand>,
    /// What is needed and not known: project documents, and wheels for their METADATA.
    need_projects: BTreeSet<String>,
    need_wheels: BTreeSet<WheelFile>,
    /// Projects whose pick waits for their document: every demand on them waits too.
    waiting: BTreeSet<String>,
    /// Once something is unknown: how many more queued demands are met as a pass knowing
    /// everything would meet them.
    exact_for: Option<usize>,
}

type Flow = Result<(), Outcome>;

fn failed(message: String) -> Outcome {
    Outcome::Step(Step::Failed { message })
}

impl<'w, 'a> Pass<'w, 'a> {
    fn new(world: &'w World<'a>, seeds: &'w BTreeMap<String, Vec<Constraint>>) -> Self {
        Pass {
            world,
            seeds,
            picks: BTreeMap::new(),
            order: Vec::new(),
            constraints: seeds.clone(),
            queue: VecDeque::new(),
            need_projects: BTreeSet::new(),
            need_wheels: BTreeSet::new(),
            waiting: BTreeSet::new(),
            exact_for: None,
        }
    }

    fn run(mut self) -> Outcome {
        match self.walk() {
            Ok(()) if self.exact_for.is_some() => self.fetch(),
            Ok(()) => Outcome::Step(self.done()),
            Err(outcome) => outcome,
        }
    }

    /// Notes that something was unknown: from here, only the demands queued now are met.
    fn defer(&mut self) {
        if self.exact_for.is_none() {
            self.exact_for = Some(self.queue.len());
        }
    }

    fn walk(&mut self) -> Flow {
        for url in &self.world.known.wheel_urls {
            self.pick_url(url)?;
        }
        for text in &self.world.known.requirements {
            let requirement =
                Requirement::parse(text).map_err(|why| failed(format!("pip.requirements: {text:?} {why}")))?;
            if requirement.applies(&self.world.env, &[]) {
                self.queue.push_back(Demand::Requirement {
                    requirement,
                    requirer: "the call".into(),
                    path: Vec::new(),
                });
            }
        }
        while let Some(demand) = self.queue.pop_front() {
            match self.exact_for {
                Some(0) => break,
                Some(left) => self.exact_for = Some(left - 1),
                None => {}
            }
            self.meet(demand)?;
        }
        Ok(())
    }

    fn done(&self) -> Step {
        let install = self
            .order
            .iter()
            .map(|key| {
                let pick = &self.picks[key];
                let (file, source, layer_path) = match &pick.source {
                    Source::Index(file) => (file.clone(), "index", format!("wheels/{}", file.filename)),
                    Source::Url(file) => (file.clone(), "url", format!("wheels/{}", file.filename)),
                    Source::Lock(package) => (self.lock_file(package), "lock", package.layer_path()),
                };
                Install { project: pick.name.clone(), version: pick.version.to_string(), file, source, layer_path }
            })
            .collect();
        Step::Done { install }
    }

    fn lock_file(&self, package: &LockPackage) -> WheelFile {
        WheelFile {
            url: format!("{}/{}", self.world.known.pyodide_index, package.file_name),
            filename: package.file_name.clone(),
            sha256: Some(package.sha256.clone()),
        }
    }

    /// A `wheelUrls` entry: picked as given, if this runtime can install it.
    fn pick_url(&mut self, url: &str) -> Flow {
        let path = url.split(['?', '#']).next().unwrap_or_default();
        let filename = decode_percent(path.rsplit('/').next().unwrap_or_default());
        let wheel = WheelName::parse(&filename).map_err(|why| failed(format!("pip.wheelUrls: {url}: {why}")))?;
        if wheel.rank(&self.world.tags).is_none() {
            return Err(failed(format!(
                "pip.wheelUrls: {url}: {filename} is tagged {}, which {} cannot install; it needs {}",
                WheelName::tag_text(&filename),
                self.world.runtime.describe(),
                needed_tags(&self.world.runtime)
            )));
        }
        let key = wheel.project.clone();
        let by = Constraint {
            requirer: "the call".into(),
            text: format!("the wheel {url}"),
            specifiers: format!("=={}", wheel.version),
        };
        let file = WheelFile { url: url.to_owned(), filename, sha256: None };
        let pick = Pick {
            name: key.clone(),
            version: wheel.version,
            source: Source::Url(file),
            extras: Vec::new(),
            path: Vec::new(),
            by,
        };
        self.add_pick(key, pick, &[])
    }

    fn meet(&mut self, demand: Demand) -> Flow {
        let key = demand.key();
        let path = demand.path();
        // A project asking for its own extras (`pkg[all]` -> `pkg[a,b]`) is no cycle.
        let own_extras = path.last() == Some(&key);
        if path.contains(&key) && !own_extras {
            let chain: Vec<&str> = path.iter().chain([&key]).map(String::as_str).collect();
            return Err(failed(format!(
                "the requirements form a cycle: {}; installing them needs a build that breaks it",
                chain.join(" -> ")
            )));
        }
        if path.len() > MAX_DEPTH {
            let chain: Vec<&str> = path.iter().chain([&key]).map(String::as_str).collect();
            return Err(failed(format!(
                "the requirement chain {} is deeper than {MAX_DEPTH}; list fewer packages",
                chain.join(" -> ")
            )));
        }
        if self.waiting.contains(&key) {
            return Ok(());
        }
        let constraint = demand.constraint();
        let constraints = self.constraints.entry(key.clone()).or_default();
        if !constraints.contains(&constraint) {
            constraints.push(constraint.clone());
        }
        if self.picks.contains_key(&key) {
            return self.check_pick(&key, &demand, constraint);
        }
        let pick = match &demand {
            Demand::LockDependency { name, requirer, .. } => self.lock_pick(name, requirer, constraint)?,
            Demand::Requirement { requirement, .. } => match self.choose(&key, requirement, constraint)? {
                Some(pick) => pick,
                None => {
                    self.need_projects.insert(key.clone());
                    self.waiting.insert(key);
                    self.defer();
                    return Ok(());
                }
            },
        };
        self.add_pick(key, pick, demand.path())
    }

    /// Picks `key`, required along `parent_path`, and queues what it requires.
    fn add_pick(&mut self, key: String, mut pick: Pick, parent_path: &[String]) -> Flow {
        if self.picks.len() >= MAX_PACKAGES {
            return Err(failed(format!("the requirements need more than {MAX_PACKAGES} projects; list fewer")));
        }
        pick.path = [parent_path, std::slice::from_ref(&key)].concat();
        let extras = std::mem::take(&mut pick.extras);
        self.picks.insert(key.clone(), pick);
        self.order.push(key.clone());
        self.expand(&key, extras, true)
    }

    /// A later demand on a picked project: its range must fit the pick, and new extras add
    /// their requirements.
    fn check_pick(&mut self, key: &str, demand: &Demand, constraint: Constraint) -> Flow {
        let pick = &self.picks[key];
        if let Demand::Requirement { requirement, .. } = demand {
            if !requirement.specifiers.contains(&pick.version) {
                return Err(self.conflict(key, constraint));
            }
            let new: Vec<String> = requirement.extras.iter().filter(|e| !pick.extras.contains(e)).cloned().collect();
            if !new.is_empty() {
                return self.expand(key, new, false);
            }
        }
        Ok(())
    }

    /// A conflict on `key`: a fresh start when some release fits every range, else the failure.
    fn conflict(&mut self, key: &str, constraint: Constraint) -> Outcome {
        let all = &self.constraints[key];
        let pick = &self.picks[key];
        let settled = self.seeds.get(key).is_some_and(|seeded| all.iter().all(|c| seeded.contains(c)));
        if !settled {
            match self.candidates(key, &specifier_sets(all)) {
                Some(Some(_)) => return Outcome::Restart(key.to_owned(), all.clone()),
                Some(None) => {}
                None => {
                    // Picked from the lock; whether the index could settle it needs its document.
                    self.need_projects.insert(key.to_owned());
                    return self.fetch();
                }
            }
        }
        let mut who: Vec<String> = vec![describe(&pick.by), describe(&constraint)];
        for other in all.iter().map(describe) {
            if !who.contains(&other) {
                who.push(other);
            }
        }
        failed(format!(
            "conflicting requirements for {}: {}; no release of {} satisfies all of them (it was resolved to {}); change or drop one of them",
            pick.name,
            who.join(", "),
            pick.name,
            pick.label(),
        ))
    }

    /// The first pick of a project required by name: the index's best fitting wheel, else the
    /// lock's package; `None` while the index's document is unknown.
    fn choose(&self, key: &str, requirement: &Requirement, by: Constraint) -> Result<Option<Pick>, Outcome> {
        let sets = specifier_sets(&self.constraints[key]);
        let name = requirement.name.clone();
        let pick = |name: String, version: Version, source: Source| Pick {
            name,
            version,
            source,
            extras: requirement.extras.clone(),
            path: Vec::new(),
            by: by.clone(),
        };
        match self.candidates(key, &sets) {
            None => Ok(None),
            Some(Some((version, source))) => {
                let name = match (&source, self.project(key)) {
                    (Source::Lock(package), _) => package.name.clone(),
                    (_, Some(project)) => project.info.name.clone(),
                    _ => name,
                };
                Ok(Some(pick(name, version, source)))
            }
            Some(None) => Err(failed(self.explain(key, &name, &self.constraints[key]))),
        }
    }

    /// The index document of `key`, once fetched (`None` also when the index has no such project).
    fn project(&self, key: &str) -> Option<&'a IndexProject> {
        self.world.known.projects.get(key).and_then(Option::as_ref)
    }

    /// The best release of `key` that fits `sets`: the index's, else the lock's (`Some(None)`:
    /// neither); `None` while the index's document is unknown.
    fn candidates(&self, key: &str, sets: &[SpecifierSet]) -> Option<Option<(Version, Source)>> {
        if !self.world.known.projects.contains_key(key) {
            return None;
        }
        if let Some((version, file)) = self.project(key).and_then(|project| self.best_index_release(project, sets)) {
            return Some(Some((version, Source::Index(file))));
        }
        let from_lock = self.world.lock.get(key).filter(|package| sets.iter().all(|s| s.contains(&package.version())));
        Some(from_lock.map(|package| (package.version(), Source::Lock(package.clone()))))
    }

    fn best_index_release(&self, project: &IndexProject, sets: &[SpecifierSet]) -> Option<(Version, WheelFile)> {
        let pinned = sets.iter().any(SpecifierSet::pins);
        let names_pre = sets.iter().any(SpecifierSet::names_prerelease);
        let fitting: Vec<(Version, WheelFile)> = project
            .releases
            .iter()
            .filter_map(|(text, files)| Some((Version::parse(text).ok()?, files)))
            .filter(|(version, _)| sets.iter().all(|s| s.contains(version)))
            .filter_map(|(version, files)| Some((version, self.best_file(files, pinned)?)))
            .collect();
        let any_final = fitting.iter().any(|(v, _)| !v.is_prerelease());
        fitting.into_iter().filter(|(v, _)| names_pre || !any_final || !v.is_prerelease()).max_by(|a, b| a.0.cmp(&b.0))
    }

    /// The file of a release this runtime installs best: a wheel with its best tag ranked
    /// highest, not yanked unless pinned, for this Python, with a published sha256.
    fn best_file(&self, files: &[IndexFile], pinned: bool) -> Option<WheelFile> {
        let python = Version::parse(&self.world.runtime.info.python).ok()?;
        files
            .iter()
            .filter(|f| pinned || !f.yanked)
            .filter(|f| f.digests.sha256.is_some())
            .filter(|f| requires_python_ok(f.requires_python.as_deref(), &python))
            .filter_map(|f| Some((WheelName::parse(&f.filename).ok()?.rank(&self.world.tags)?, f)))
            .min_by_key(|(rank, _)| *rank)
            .map(|(_, f)| WheelFile {
                url: f.url.clone(),
                filename: f.filename.clone(),
                sha256: f.digests.sha256.clone(),
            })
    }

    /// Why no release of `key` can be installed for these constraints.
    fn explain(&self, key: &str, name: &str, constraints: &[Constraint]) -> String {
        let sets = specifier_sets(constraints);
        let wanted: Vec<String> = constraints.iter().map(describe).collect();
        let wanted = wanted.join(", ");
        let index = match self.project(key) {
            None => format!("the package index has no project {name:?}"),
            Some(project) => self.explain_index(project, &sets, &wanted),
        };
        let lock = match self.world.lock.get(key) {
            Some(package) => format!(
                "Pyodide's distribution ({}) has {} {}, which does not fit",
                self.world.known.lock_source, package.name, package.version
            ),
            None => format!("it is not in Pyodide's distribution ({}) either", self.world.known.lock_source),
        };
        format!("{index}; {lock}")
    }

    fn explain_index(&self, project: &IndexProject, sets: &[SpecifierSet], wanted: &str) -> String {
        let name = &project.info.name;
        let mut versions: Vec<(Version, &Vec<IndexFile>)> =
            project.releases.iter().filter_map(|(v, files)| Some((Version::parse(v).ok()?, files))).collect();
        versions.sort_by(|a, b| a.0.cmp(&b.0));
        let latest = versions.iter().rev().find(|(_, files)| !files.is_empty()).map(|(v, _)| v.to_string());
        let Some((version, files)) =
            versions.iter().rev().find(|(v, f)| !f.is_empty() && sets.iter().all(|s| s.contains(v)))
        else {
            let latest = latest.map_or(String::new(), |v| format!(" (latest is {v})"));
            return format!("no release of {name} matches {wanted}{latest}");
        };
        let wheels: Vec<&IndexFile> = files.iter().filter(|f| f.filename.ends_with(".whl")).collect();
        let python = &self.world.runtime.info.python;
        let why = if wheels.is_empty() {
            "has only a source distribution (sdist), no wheel: building it needs a compiler and setup code the sandbox does not run".to_owned()
        } else if wheels
            .iter()
            .all(|f| WheelName::parse(&f.filename).ok().and_then(|w| w.rank(&self.world.tags)).is_none())
        {
            let tags: Vec<String> = wheels.iter().take(6).map(|f| WheelName::tag_text(&f.filename)).collect();
            let more = if wheels.len() > 6 { ", ..." } else { "" };
            format!(
                "has no wheel for {}: its wheels are tagged {}{more}, and it needs {}",
                self.world.runtime.describe(),
                tags.join(", "),
                needed_tags(&self.world.runtime)
            )
        } else if wheels.iter().all(|f| f.yanked) {
            format!("has only yanked wheels; pin it (=={version}) to use them anyway")
        } else if wheels.iter().all(|f| f.digests.sha256.is_none()) {
            "has wheels the index publishes no sha256 for, so none can be checked".to_owned()
        } else {
            format!("has wheels only for other Python versions (requires_python excludes {python})")
        };
        format!("{name}=={version} {why}")
    }

    /// A project a lock package depends on, from that lock.
    fn lock_pick(&self, name: &str, requirer: &str, by: Constraint) -> Result<Pick, Outcome> {
        let package = self.world.lock.get(name).ok_or_else(|| {
            failed(format!(
                "{requirer} depends on {name}, which Pyodide's lock ({}) does not list; the lock is incomplete",
                self.world.known.lock_source
            ))
        })?;
        Ok(Pick {
            name: package.name.clone(),
            version: package.version(),
            source: Source::Lock(package.clone()),
            extras: Vec::new(),
            path: Vec::new(),
            by,
        })
    }

    /// Queues what `key`'s pick requires for `extras` (all of its requirements on the first
    /// expansion, only those of the new extras later).
    fn expand(&mut self, key: &str, extras: Vec<String>, first: bool) -> Flow {
        let pick = &self.picks[key];
        let (requirer, path) = (pick.label(), pick.path.clone());
        match pick.source.clone() {
            Source::Lock(package) => {
                if !extras.is_empty() {
                    return Err(failed(format!(
                        "{} comes from Pyodide's distribution, whose lock lists no extras; drop [{}] and list the packages it would add",
                        pick.label(),
                        extras.join(",")
                    )));
                }
                if first {
                    for name in package.depends {
                        self.queue.push_back(Demand::LockDependency {
                            name,
                            requirer: requirer.clone(),
                            path: path.clone(),
                        });
                    }
                }
            }
            Source::Index(file) | Source::Url(file) => {
                let Some(metadata) = self.metadata(key, &file)? else {
                    // Its requirements come after every demand queued now: meet those first.
                    self.need_wheels.insert(file);
                    self.defer();
                    self.picks.get_mut(key).expect("picked").extras.extend(extras);
                    return Ok(());
                };
                for line in &metadata.requires_dist {
                    let requirement = Requirement::parse(line).map_err(|why| {
                        failed(format!("{requirer}'s METADATA has Requires-Dist {line:?}, which {why}"))
                    })?;
                    let mentions_extra = requirement.marker.as_ref().is_some_and(super::marker::Marker::mentions_extra);
                    let applies = requirement.applies(&self.world.env, &extras);
                    if applies && (first || mentions_extra) {
                        let (requirer, path) = (requirer.clone(), path.clone());
                        self.queue.push_back(Demand::Requirement { requirement, requirer, path });
                    }
                }
                self.picks.get_mut(key).expect("picked").extras.extend(extras);
            }
        }
        Ok(())
    }

    /// The METADATA of a picked wheel, checked to be of that project and version and for this
    /// Python; `None` while it is unknown.
    fn metadata(&self, key: &str, file: &WheelFile) -> Result<Option<CoreMetadata>, Outcome> {
        let Some(text) = self.world.known.metadata.get(&file.url) else { return Ok(None) };
        let pick = &self.picks[key];
        let what = format!("{} (for {})", file.filename, pick.label());
        let metadata = CoreMetadata::parse(text).map_err(|why| failed(format!("{what}: {why}")))?;
        let version_ok = Version::parse(&metadata.version).is_ok_and(|v| v == pick.version);
        if canonical_name(&metadata.name) != key || !version_ok {
            return Err(failed(format!(
                "{what}: its METADATA says it is {} {}; the wheel is not what its name says",
                metadata.name, metadata.version
            )));
        }
        let python = Version::parse(&self.world.runtime.info.python).map_err(failed)?;
        if !requires_python_ok(metadata.requires_python.as_deref(), &python) {
            return Err(failed(format!(
                "{what} requires Python {}, and {} is {}",
                metadata.requires_python.unwrap_or_default(),
                self.world.runtime.describe(),
                python
            )));
        }
        Ok(Some(metadata))
    }

    /// A fetch of what this pass needed, with the documents every requirement still queued
    /// will need anyway, so the build fetches them together.
    fn fetch(&mut self) -> Outcome {
        let known = &self.world.known.projects;
        let queued: Vec<String> = self
            .queue
            .iter()
            .filter_map(|demand| match demand {
                Demand::Requirement { requirement, .. } => Some(requirement.key()),
                Demand::LockDependency { .. } => None,
            })
            .filter(|key| !self.picks.contains_key(key) && !known.contains_key(key))
            .collect();
        self.need_projects.extend(queued);
        let projects = std::mem::take(&mut self.need_projects).into_iter().collect();
        let wheels = std::mem::take(&mut self.need_wheels).into_iter().collect();
        Outcome::Step(Step::Fetch { projects, wheels })
    }
}

fn specifier_sets(constraints: &[Constraint]) -> Vec<SpecifierSet> {
    constraints.iter().map(|c| SpecifierSet::parse(&c.specifiers).unwrap_or_default()).collect()
}

/// `six>=1.6 (python-dateutil 4.0.0)`
fn describe(constraint: &Constraint) -> String {
    format!("{} ({})", constraint.text, constraint.requirer)
}

/// Whether a `Requires-Python` admits `python`; an unreadable one does not stand in the way.
fn requires_python_ok(requires: Option<&str>, python: &Version) -> bool {
    requires.is_none_or(|text| SpecifierSet::parse(text).map_or(true, |set| set.contains(python)))
}

/// `%2B` -> `+` in a file name taken from a URL.
fn decode_percent(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
