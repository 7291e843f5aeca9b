//! The crate graph stays one-way (ARCHITECTURE.md): every workspace crate has its place, each
//! depends only on the crates below it, the pure crates reach no network, files or command
//! line, and no crate holds much more than 30 % of the code. Inside every crate the modules
//! form no circle, and no command module of the binary uses another.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use crate::common::repo;

/// Each workspace crate and the workspace crates it may depend on (normal and build
/// dependencies; tests may reach further).
const LAYERS: &[(&str, &[&str])] = &[
    ("gpuwise-catalog", &[]),
    ("gpuwise-core", &["gpuwise-catalog"]),
    ("gpuwise-render", &["gpuwise-core"]),
    (
        "gpuwise-plan",
        &["gpuwise-catalog", "gpuwise-core", "gpuwise-render"],
    ),
    ("gpuwise-sim", &["gpuwise-plan", "gpuwise-render"]),
    ("gpuwise-pack", &["gpuwise-render"]),
    (
        "gpuwise-advise",
        &[
            "gpuwise-core",
            "gpuwise-catalog",
            "gpuwise-plan",
            "gpuwise-sim",
        ],
    ),
    (
        "gpuwise-ledger",
        &["gpuwise-core", "gpuwise-catalog", "gpuwise-render"],
    ),
    (
        "gpuwise-jobs",
        &["gpuwise-core", "gpuwise-ledger", "gpuwise-render"],
    ),
    ("gpuwise-sources", &["gpuwise-core", "gpuwise-catalog"]),
    ("gpuwise-prom", &["gpuwise-core", "gpuwise-sources"]),
    ("gpuwise-catalog-import", &["gpuwise-catalog"]),
    ("gpuwise-synth", &["gpuwise-core"]),
    ("gpuwise-store", &["gpuwise-core"]),
    ("gpuwise-record", &[]),
    (
        "gpuwise-analysis",
        &[
            "gpuwise-core",
            "gpuwise-advise",
            "gpuwise-ledger",
            "gpuwise-render",
        ],
    ),
    (
        "gpuwise-server",
        &[
            "gpuwise-core",
            "gpuwise-sources",
            "gpuwise-analysis",
            "gpuwise-render",
        ],
    ),
    (
        "gpuwise",
        &[
            "gpuwise-core",
            "gpuwise-catalog",
            "gpuwise-plan",
            "gpuwise-advise",
            "gpuwise-sources",
            "gpuwise-prom",
            "gpuwise-render",
            "gpuwise-synth",
            "gpuwise-record",
            "gpuwise-ledger",
            "gpuwise-sim",
            "gpuwise-server",
            "gpuwise-pack",
            "gpuwise-analysis",
            "gpuwise-catalog-import",
            "gpuwise-jobs",
            "gpuwise-store",
        ],
    ),
];

/// The most workspace crates a crate other than the binary may depend on: past that, a crate
/// is becoming a second centre (rendering every capability, say) and should be split.
const MOST_GPUWISE_DEPENDENCIES: usize = 4;

/// The pure crates: no I/O, no clock, no command line.
const PURE: &[&str] = &[
    "gpuwise-catalog",
    "gpuwise-core",
    "gpuwise-plan",
    "gpuwise-advise",
    "gpuwise-render",
    "gpuwise-ledger",
    "gpuwise-sim",
    "gpuwise-pack",
    "gpuwise-analysis",
    "gpuwise-jobs",
];

/// Crates that do I/O or parse a command line, which a pure crate must not depend on.
const EDGE_ONLY: &[&str] = &[
    "clap",
    "ureq",
    "fs-err",
    "hyper",
    "nvml-wrapper",
    "indicatif",
    "signal-hook",
    "rayon",
    "tokio",
    "axum",
    "tower-http",
    "prometheus-client",
];

fn metadata() -> serde_json::Value {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(repo())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("metadata JSON")
}

fn rust_lines(dir: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).expect("src dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            n += rust_lines(&p);
        } else if p.extension().is_some_and(|x| x == "rs") {
            n += std::fs::read_to_string(&p).expect("read").lines().count();
        }
    }
    n
}

#[test]
fn the_crate_graph_is_one_way() {
    let layers: BTreeMap<&str, BTreeSet<&str>> = LAYERS
        .iter()
        .map(|(c, deps)| (*c, deps.iter().copied().collect()))
        .collect();
    // The allowed edges themselves have no cycle: each crate's allowed dependencies come
    // earlier in LAYERS; and no crate but the binary may lean on many others.
    for (i, (c, deps)) in LAYERS.iter().enumerate() {
        assert!(
            *c == "gpuwise" || deps.len() <= MOST_GPUWISE_DEPENDENCIES,
            "{c} may depend on {} workspace crates: at most {MOST_GPUWISE_DEPENDENCIES} (split it)",
            deps.len()
        );
        for d in *deps {
            let j = LAYERS.iter().position(|(x, _)| x == d);
            assert!(
                j.is_some_and(|j| j < i),
                "{c} may depend on {d}, which must come before it in LAYERS"
            );
        }
    }
    let meta = metadata();
    let packages = meta["packages"].as_array().expect("packages");
    let mut sizes = BTreeMap::new();
    for p in packages {
        let name = p["name"].as_str().expect("name");
        let allowed = layers.get(name).unwrap_or_else(|| {
            panic!("crate {name} has no place in the graph: add it to LAYERS and ARCHITECTURE.md")
        });
        for d in p["dependencies"].as_array().expect("deps") {
            let dep = d["name"].as_str().expect("dep name");
            if d["kind"].as_str() == Some("dev") {
                continue;
            }
            if dep.starts_with("gpuwise") {
                assert!(
                    allowed.contains(dep),
                    "{name} depends on {dep}, against the one-way graph in ARCHITECTURE.md"
                );
            }
            if PURE.contains(&name) {
                assert!(
                    !EDGE_ONLY.contains(&dep),
                    "{name} is pure but depends on {dep} (I/O or command line)"
                );
            }
        }
        let manifest = Path::new(p["manifest_path"].as_str().expect("manifest"));
        let src = manifest.parent().expect("crate dir").join("src");
        sizes.insert(name.to_owned(), rust_lines(&src));
        assert_eq!(
            p["publish"],
            serde_json::json!([]),
            "{name}: publish = false"
        );
    }
    assert_eq!(
        sizes.len(),
        LAYERS.len(),
        "every crate in LAYERS exists: {sizes:?}"
    );
    let total: usize = sizes.values().sum();
    for (name, n) in &sizes {
        assert!(
            *n * 100 <= total * 33,
            "{name} holds {n} of {total} lines ({}%): split it (ARCHITECTURE.md)",
            n * 100 / total
        );
    }
}

/// The modules of `src` (top-level files and folders, `lib.rs`/`main.rs` left out) and, for
/// each, the other top-level modules its code (comments and test modules left out) names
/// through `crate::`, or through `super::` from a top-level file.
fn module_uses(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).expect("src dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut all = Vec::new();
    files(src, &mut all);
    let top = |p: &Path| -> Option<(String, bool)> {
        let rel = p.strip_prefix(src).ok()?;
        let first = rel.components().next()?.as_os_str().to_str()?.to_owned();
        let name = first.trim_end_matches(".rs").to_owned();
        let file_at_top = rel.components().count() == 1;
        (name != "lib" && name != "main").then_some((name, file_at_top))
    };
    let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in &all {
        let Some((name, at_top)) = top(p) else {
            continue;
        };
        let text = std::fs::read_to_string(p).expect("read");
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
        let named = uses.entry(name.clone()).or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            let mut prefixes = vec!["crate::"];
            if at_top {
                prefixes.push("super::");
            }
            for prefix in prefixes {
                for (i, _) in line.match_indices(prefix) {
                    let rest = &line[i + prefix.len()..];
                    let mut items = vec![rest];
                    // `use crate::{a::X, b};`
                    if let Some(group) = rest.strip_prefix('{') {
                        items = group.split('}').next().unwrap_or("").split(',').collect();
                    }
                    for item in items {
                        let m: String = item
                            .trim()
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect();
                        if !m.is_empty() && m != name {
                            named.insert(m);
                        }
                    }
                }
            }
        }
    }
    let names: BTreeSet<String> = uses.keys().cloned().collect();
    for v in uses.values_mut() {
        v.retain(|m| names.contains(m));
    }
    uses
}

/// A circle in `uses`, if any (depth-first search).
fn circle(uses: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        uses: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut c = path[i..].to_vec();
            c.push(m.to_owned());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_owned());
        for next in uses.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, uses, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    uses.keys()
        .find_map(|m| visit(m, uses, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_has_a_circle_of_modules() {
    let crates = repo().join("crates");
    let mut checked = 0;
    for e in std::fs::read_dir(&crates).expect("crates") {
        let src = e.expect("entry").path().join("src");
        if !src.is_dir() {
            continue;
        }
        let uses = module_uses(&src);
        if let Some(c) = circle(&uses) {
            panic!(
                "{}: the modules {} use one another",
                src.display(),
                c.join(" → ")
            );
        }
        checked += 1;
    }
    assert!(checked >= 15, "every crate looked at ({checked})");
    // The check finds what it is for: two modules that name each other.
    let planted: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_owned(), ["b".to_owned()].into()),
        ("b".to_owned(), ["a".to_owned()].into()),
    ]
    .into();
    assert!(circle(&planted).is_some());
}

/// Commands parse flags, ask the library crates and render; they never call one another (what
/// two commands share lives in a module below them: `fleet`, `inputs`, `synthetic`, …).
#[test]
fn no_command_uses_another() {
    let dir = repo().join("crates/gpuwise/src/commands");
    let commands: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("commands")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_owned()))
        .filter(|n| n != "mod")
        .collect();
    assert!(commands.len() >= 14, "{commands:?}");
    let uses = module_uses(&dir);
    for (c, named) in &uses {
        if c == "mod" {
            continue;
        }
        let others: Vec<&String> = named.iter().filter(|n| commands.contains(*n)).collect();
        assert!(
            others.is_empty(),
            "the command `{c}` uses the command(s) {others:?}"
        );
    }
    for e in std::fs::read_dir(repo().join("crates/gpuwise/src")).expect("src") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&p).expect("read");
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            assert!(
                name == "main.rs" || !text.contains("crate::commands::"),
                "{name} reaches into a command"
            );
        }
    }
}
