//! # Who owns a device, and when
//!
//! A team file (`--teams`, docs/teams.md) names the owner of each device from, first match
//! wins in this order:
//!
//! 1. `[[assign]]` rules: a device (by host and/or GPU UUID glob) belongs to a team from a date
//!    (inclusive) until a date (exclusive), so a device can move to another team on a date;
//! 2. `[pods]`, 3. `[containers]`, 4. `[namespaces]`: globs over the device's labels (each
//!    label's most frequent value over the window);
//! 5. `labels = ["team", …]`: labels whose value *is* the team (a Kubernetes pod label exported
//!    by DCGM, a custom label);
//! 6. `[hosts]`: globs over host names.
//!
//! Within a table, patterns are tried in the order of the file's keys as TOML orders them
//! (alphabetical); write one pattern per owner where that matters, or use `[[assign]]`, whose
//! order is the file's. A device no rule names has no owner: the ledger books it as
//! `(untagged)`, never to a guessed team.

use crate::sample::{DeviceInfo, DeviceKey, EpochMs};

/// A bad team file.
#[derive(Debug, thiserror::Error)]
#[error("`{origin}` {message}")]
pub struct TeamsError {
    /// The file.
    pub origin: String,
    /// What is wrong.
    pub message: String,
}

/// A time-ranged ownership rule.
#[derive(Clone, Debug)]
pub struct Assign {
    /// Host glob (`None`: any host).
    pub host: Option<glob::Pattern>,
    /// GPU glob, matched against the device's GPU id (UUID) (`None`: any GPU).
    pub gpu: Option<glob::Pattern>,
    /// Team.
    pub team: String,
    /// From (inclusive), epoch ms; `None`: since always.
    pub from_ms: Option<EpochMs>,
    /// Until (exclusive), epoch ms; `None`: for ever.
    pub until_ms: Option<EpochMs>,
}

impl Assign {
    fn covers(&self, key: &DeviceKey, at: Option<EpochMs>) -> bool {
        let host = self.host.as_ref().is_none_or(|p| p.matches(&key.host));
        let gpu = self.gpu.as_ref().is_none_or(|p| p.matches(&key.gpu));
        let when = at.is_some_and(|t| {
            self.from_ms.is_none_or(|f| t >= f) && self.until_ms.is_none_or(|u| t < u)
        });
        host && gpu && when
    }
}

/// Maps devices to teams (see the module documentation for the order of rules).
#[derive(Clone, Debug, Default)]
pub struct TeamMap {
    /// Time-ranged rules, in file order.
    pub assign: Vec<Assign>,
    /// `(pattern, team)` for pods.
    pub pods: Vec<(glob::Pattern, String)>,
    /// `(pattern, team)` for containers.
    pub containers: Vec<(glob::Pattern, String)>,
    /// `(pattern, team)` for namespaces.
    pub namespaces: Vec<(glob::Pattern, String)>,
    /// Labels whose value is the team.
    pub labels: Vec<String>,
    /// `(pattern, team)` for host names.
    pub hosts: Vec<(glob::Pattern, String)>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AssignFile {
    team: String,
    host: Option<String>,
    gpu: Option<String>,
    from: Option<String>,
    until: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    assign: Vec<AssignFile>,
    #[serde(default)]
    pods: toml::Table,
    #[serde(default)]
    containers: toml::Table,
    #[serde(default)]
    namespaces: toml::Table,
    #[serde(default)]
    labels: Vec<String>,
    #[serde(default)]
    hosts: toml::Table,
}

/// `2026-11-15` (UTC midnight) or an RFC 3339 timestamp.
/// Whether `team` can name a team: not blank, and not in parentheses, which the reports keep
/// for their own buckets (`(untagged)`, `(fleet)`): a team literally named `(untagged)` would
/// merge into the untagged costs. A label value that is not usable names no team. (Hostile
/// characters are allowed: every output escapes them.)
///
/// # Errors
/// Why not, for the message.
pub fn usable_team(team: &str) -> Result<(), String> {
    let t = team.trim();
    if t.is_empty() {
        return Err("the team name is empty".to_owned());
    }
    if t.starts_with('(') && t.ends_with(')') {
        return Err(format!(
            "`{t}`: names in parentheses are kept for the reports' own buckets"
        ));
    }
    Ok(())
}

fn date_ms(s: &str) -> Option<EpochMs> {
    if let Ok(t) = s.parse::<jiff::Timestamp>() {
        return Some(t.as_millisecond());
    }
    let d = s.parse::<jiff::civil::Date>().ok()?;
    jiff::tz::TimeZone::UTC
        .to_timestamp(d.to_datetime(jiff::civil::Time::midnight()))
        .ok()
        .map(jiff::Timestamp::as_millisecond)
}

impl TeamMap {
    /// Every team the file names (assignments and pod, container, namespace and host rules;
    /// teams from labels are the data's).
    #[must_use]
    pub fn named_teams(&self) -> std::collections::BTreeSet<String> {
        self.assign
            .iter()
            .map(|a| a.team.clone())
            .chain(
                [&self.pods, &self.containers, &self.namespaces, &self.hosts]
                    .into_iter()
                    .flat_map(|rules| rules.iter().map(|(_, t)| t.clone())),
            )
            .collect()
    }

    /// Parse a team file.
    ///
    /// # Errors
    /// [`TeamsError`] naming the table, key and problem.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, TeamsError> {
        let bad = |message: String| TeamsError {
            origin: origin.to_owned(),
            message,
        };
        let file: File = toml::from_str(text).map_err(|e| {
            bad(format!(
                "is not a valid team file: {}",
                gpuwise_catalog::toml_message(&e, text)
            ))
        })?;
        let table = |t: toml::Table,
                     kind: &str|
         -> Result<Vec<(glob::Pattern, String)>, TeamsError> {
            t.into_iter()
                .map(|(k, v)| {
                    let team = v
                        .as_str()
                        .ok_or_else(|| bad(format!("[{kind}] `{k}`: the team must be a string")))?
                        .to_owned();
                    usable_team(&team).map_err(|why| bad(format!("[{kind}] `{k}`: {why}")))?;
                    let pat =
                        glob::Pattern::new(&k).map_err(|e| bad(format!("[{kind}] `{k}`: {e}")))?;
                    Ok((pat, team))
                })
                .collect()
        };
        let glob_of = |n: usize, what: &str, v: Option<String>| {
            v.map(|g| {
                glob::Pattern::new(&g)
                    .map_err(|e| bad(format!("[[assign]] #{n} {what} `{g}`: {e}")))
            })
            .transpose()
        };
        let mut assign = Vec::with_capacity(file.assign.len());
        for (i, a) in file.assign.into_iter().enumerate() {
            let n = i + 1;
            usable_team(&a.team).map_err(|why| bad(format!("[[assign]] #{n}: {why}")))?;
            if a.host.is_none() && a.gpu.is_none() {
                return Err(bad(format!(
                    "[[assign]] #{n} (team {}): name a host or a gpu",
                    a.team
                )));
            }
            let when = |what: &str, v: Option<String>| {
                v.map(|s| {
                    date_ms(&s).ok_or_else(|| {
                        bad(format!(
                            "[[assign]] #{n} {what} `{s}` is not a date (2026-11-15) or an RFC 3339 time"
                        ))
                    })
                })
                .transpose()
            };
            let from_ms = when("from", a.from)?;
            let until_ms = when("until", a.until)?;
            if let (Some(f), Some(u)) = (from_ms, until_ms)
                && u <= f
            {
                return Err(bad(format!("[[assign]] #{n}: until is not after from")));
            }
            assign.push(Assign {
                host: glob_of(n, "host", a.host)?,
                gpu: glob_of(n, "gpu", a.gpu)?,
                team: a.team,
                from_ms,
                until_ms,
            });
        }
        Ok(Self {
            assign,
            pods: table(file.pods, "pods")?,
            containers: table(file.containers, "containers")?,
            namespaces: table(file.namespaces, "namespaces")?,
            labels: file.labels,
            hosts: table(file.hosts, "hosts")?,
        })
    }

    /// Whether the file names no rule at all.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.assign.is_empty()
            && self.pods.is_empty()
            && self.containers.is_empty()
            && self.namespaces.is_empty()
            && self.labels.is_empty()
            && self.hosts.is_empty()
    }

    /// The owner of the device at `at` (epoch ms); with `at = None` no `[[assign]]` rule
    /// applies, since each holds for a time.
    #[must_use]
    pub fn owner<'a>(
        &'a self,
        key: &DeviceKey,
        info: &'a DeviceInfo,
        at: Option<EpochMs>,
    ) -> Option<&'a str> {
        fn find<'a>(rules: &'a [(glob::Pattern, String)], v: Option<&str>) -> Option<&'a str> {
            v.and_then(|v| {
                rules
                    .iter()
                    .find(|(p, _)| p.matches(v))
                    .map(|(_, t)| t.as_str())
            })
        }
        if let Some(a) = self.assign.iter().find(|a| a.covers(key, at)) {
            return Some(&a.team);
        }
        find(&self.pods, info.label("pod"))
            .or_else(|| find(&self.containers, info.label("container")))
            .or_else(|| find(&self.namespaces, info.label("namespace")))
            .or_else(|| {
                self.labels
                    .iter()
                    .find_map(|l| info.label(l).filter(|v| usable_team(v).is_ok()))
            })
            .or_else(|| find(&self.hosts, Some(&key.host)))
    }

    /// The hours (starts, ascending) at which some `[[assign]]` rule of this device begins or
    /// ends: where ownership can change.
    #[must_use]
    pub fn changes(&self, key: &DeviceKey) -> Vec<EpochMs> {
        let mut out: Vec<EpochMs> = self
            .assign
            .iter()
            .filter(|a| {
                a.host.as_ref().is_none_or(|p| p.matches(&key.host))
                    && a.gpu.as_ref().is_none_or(|p| p.matches(&key.gpu))
            })
            .flat_map(|a| [a.from_ms, a.until_ms])
            .flatten()
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(labels: &[(&str, &str)]) -> DeviceInfo {
        let mut i = DeviceInfo::default();
        for (k, v) in labels {
            i.labels
                .entry((*k).to_owned())
                .or_default()
                .insert((*v).to_owned(), 1);
        }
        i
    }

    #[test]
    fn precedence_pod_container_namespace_label_host() {
        let t = TeamMap::from_toml(
            "labels = [\"team\"]\n[hosts]\n\"train-*\" = \"research\"\n[namespaces]\n\"serve\" = \"platform\"\n[containers]\n\"vllm\" = \"llm\"\n[pods]\n\"jupyter-*\" = \"notebooks\"\n",
            "teams.toml",
        )
        .expect("valid");
        let k = DeviceKey::new("train-1", "GPU-1");
        let own = |l: &[(&str, &str)]| t.owner(&k, &info(l), Some(0)).map(str::to_owned);
        assert_eq!(
            own(&[("namespace", "serve"), ("pod", "jupyter-x")]).as_deref(),
            Some("notebooks")
        );
        assert_eq!(
            own(&[("namespace", "serve"), ("container", "vllm")]).as_deref(),
            Some("llm")
        );
        assert_eq!(own(&[("namespace", "serve")]).as_deref(), Some("platform"));
        assert_eq!(own(&[("team", "vision")]).as_deref(), Some("vision"));
        assert_eq!(own(&[]).as_deref(), Some("research"));
        let other = DeviceKey::new("other", "GPU-2");
        assert_eq!(t.owner(&other, &info(&[]), None), None);
        assert!(TeamMap::from_toml("[hosts]\na = 1", "t.toml").is_err());
    }

    #[test]
    fn a_device_moves_to_another_team_on_a_date() {
        let t = TeamMap::from_toml(
            "[[assign]]\nhost = \"gpu-7\"\nteam = \"vision\"\nuntil = \"2026-11-15\"\n\
             [[assign]]\nhost = \"gpu-7\"\nteam = \"speech\"\nfrom = \"2026-11-15\"\n\
             [hosts]\n\"gpu-*\" = \"platform\"\n",
            "teams.toml",
        )
        .expect("valid");
        let k = DeviceKey::new("gpu-7", "GPU-7");
        let i = DeviceInfo::default();
        let nov15 = date_ms("2026-11-15").expect("date");
        assert_eq!(t.owner(&k, &i, Some(nov15 - 1)), Some("vision"));
        assert_eq!(t.owner(&k, &i, Some(nov15)), Some("speech"));
        assert_eq!(t.owner(&k, &i, None), Some("platform"));
        assert_eq!(t.changes(&k), vec![nov15]);
        assert!(t.changes(&DeviceKey::new("gpu-8", "GPU-8")).is_empty());
    }

    #[test]
    fn bad_assign_rules_say_which_and_why() {
        let err = |s: &str| {
            TeamMap::from_toml(s, "t.toml")
                .expect_err("bad")
                .to_string()
        };
        assert_eq!(
            err("[[assign]]\nteam = \"a\"\n"),
            "`t.toml` [[assign]] #1 (team a): name a host or a gpu"
        );
        assert!(
            err("[[assign]]\nteam = \"a\"\nhost = \"h\"\nfrom = \"soon\"\n")
                .contains("#1 from `soon`")
        );
        assert!(err("[[assign]]\nteam = \"a\"\nhost = \"h\"\nfrom = \"2026-02-01\"\nuntil = \"2026-01-01\"\n").contains("until is not after from"));
        // Names that would vanish or merge: blank, the untagged bucket, a forged line.
        assert_eq!(
            err("[[assign]]\nteam = \"\"\nhost = \"h\"\n"),
            "`t.toml` [[assign]] #1: the team name is empty"
        );
        assert!(err("[hosts]\n\"gpu-*\" = \"(untagged)\"\n").contains(
            "[hosts] `gpu-*`: `(untagged)`: names in parentheses are kept for the reports' own buckets"
        ));
        // A label whose value cannot name a team names none: the next rule decides.
        let t = TeamMap::from_toml("labels = [\"team\"]\n[hosts]\n\"gpu-*\" = \"ops\"\n", "t")
            .expect("valid");
        let key = DeviceKey::new("gpu-1", "GPU-1");
        assert_eq!(
            t.owner(&key, &info(&[("team", "(untagged)")]), None),
            Some("ops")
        );
        assert_eq!(t.owner(&key, &info(&[("team", "ml")]), None), Some("ml"));
    }
}
