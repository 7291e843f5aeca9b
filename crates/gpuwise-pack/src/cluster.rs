//! Nodes and the workloads to place on them.
//!
//! Both come as CSV with a header; columns are found by name, so the Alibaba 2023 lists
//! (`openb_node_list*.csv`, `openb_pod_list*.csv`) and a hand-written workloads file read
//! alike:
//!
//! - nodes: `sn` (or `name`, `node`); `gpu` (or `gpus`, `num_gpu`); optional `cpu_milli`,
//!   `memory_mib` (absent: that resource is not checked) and `model` (or `gpu_model`; empty for
//!   a node without GPUs);
//! - workloads: `name` (or `pod`, `workload`); `num_gpu` (or `gpus`); optional `gpu_milli` (the
//!   share of each GPU in thousandths, 1–1000; default 1000 when GPUs are asked for) or
//!   `gpu_fraction` (0–1), `cpu_milli`, `memory_mib`, `gpu_spec` (or `gpu_model`: the GPU
//!   models allowed, `|`-separated, empty: any) and `mig_profile` (e.g. `3g.40gb`, for the MIG
//!   policy).
//!
//! A row with a missing or bad field is skipped and counted by reason; other columns (the
//! Alibaba lists' `qos`, `pod_phase`, times) are ignored.

use std::collections::BTreeMap;

/// A node: CPU, memory and GPUs of one model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Its name.
    pub name: String,
    /// CPU in thousandths of a core (`None`: not checked).
    pub cpu_milli: Option<i64>,
    /// Memory in MiB (`None`: not checked).
    pub memory_mib: Option<i64>,
    /// GPUs.
    pub gpus: u32,
    /// GPU model (empty without GPUs).
    pub model: String,
}

/// A workload (a pod): what it asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pod {
    /// Its name.
    pub name: String,
    /// CPU in thousandths of a core.
    pub cpu_milli: i64,
    /// Memory in MiB.
    pub memory_mib: i64,
    /// GPUs.
    pub num_gpu: u32,
    /// Thousandths of each GPU (1–1000; 0 without GPUs). Below 1000 only with one GPU: a
    /// share of a GPU others use too.
    pub gpu_milli: u32,
    /// GPU models it may run on (empty: any).
    pub gpu_spec: Vec<String>,
    /// MIG profile it asks for (`3g.40gb`), for the MIG policy.
    pub mig_profile: Option<String>,
}

impl Pod {
    /// GPU thousandths in all (`num_gpu × gpu_milli`).
    #[must_use]
    pub fn total_milli(&self) -> i64 {
        i64::from(self.num_gpu) * i64::from(self.gpu_milli)
    }

    /// A share of one GPU (below 1000 thousandths).
    #[must_use]
    pub fn is_share(&self) -> bool {
        self.num_gpu == 1 && self.gpu_milli < 1000
    }

    /// Its kind, for counting failures: `cpu-only`, `gpu-share`, `1-gpu`, `N-gpu`.
    #[must_use]
    pub fn kind(&self) -> String {
        match (self.num_gpu, self.is_share()) {
            (0, _) => "cpu-only".into(),
            (_, true) => "gpu-share".into(),
            (n, false) => format!("{n}-gpu"),
        }
    }
}

/// Rows read, and rows skipped by reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read<T> {
    /// What was read, in file order.
    pub items: Vec<T>,
    /// Rows skipped, by reason.
    pub skipped: BTreeMap<String, u64>,
}

impl<T> Default for Read<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            skipped: BTreeMap::new(),
        }
    }
}

/// A list that cannot be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {message}")]
pub struct ClusterError {
    origin: String,
    message: String,
}

fn bad(origin: &str, message: impl Into<String>) -> ClusterError {
    ClusterError {
        origin: origin.to_owned(),
        message: message.into(),
    }
}

fn missing(origin: &str, cols: &[(Option<usize>, &str)]) -> ClusterError {
    let names: Vec<&str> = cols
        .iter()
        .filter(|(i, _)| i.is_none())
        .map(|(_, n)| *n)
        .collect();
    bad(origin, format!("header lacks {}", names.join(" and ")))
}

/// ` (rows skipped: why ×n, …)`, or nothing.
fn skips(skipped: &BTreeMap<String, u64>) -> String {
    if skipped.is_empty() {
        return String::new();
    }
    let list: Vec<String> = skipped.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
    format!(" (rows skipped: {})", list.join(", "))
}

struct Header {
    cols: Vec<String>,
}

impl Header {
    fn find(&self, names: &[&str]) -> Option<usize> {
        self.cols.iter().position(|c| names.contains(&c.as_str()))
    }
}

/// The header and the rows (blank lines dropped; quoted fields may hold commas; a row the
/// CSV reader rejects becomes an empty row, skipped for its missing name).
fn split(text: &str, origin: &str) -> Result<(Header, Vec<Vec<String>>), ClusterError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(text.trim_start_matches('\u{feff}').as_bytes());
    let mut rows = reader.records().map(|r| {
        r.map(|rec| rec.iter().map(str::to_owned).collect::<Vec<String>>())
            .unwrap_or_default()
    });
    let header = rows
        .by_ref()
        .find(|r| r.iter().any(|f| !f.is_empty()))
        .ok_or_else(|| bad(origin, "empty: no header"))?;
    let cols = header.iter().map(|c| c.to_ascii_lowercase()).collect();
    let rows = rows
        .filter(|r| r.is_empty() || r.iter().any(|f| !f.is_empty()))
        .collect();
    Ok((Header { cols }, rows))
}

fn field(f: &[String], i: Option<usize>) -> Option<&str> {
    i.and_then(|i| f.get(i))
        .map(String::as_str)
        .filter(|v| !v.is_empty() && !v.eq_ignore_ascii_case("nan"))
}

/// A whole number ≥ 0 (`12000`, or `12000.0` as pandas writes it).
fn count(v: &str) -> Option<i64> {
    let x: f64 = v.parse().ok()?;
    (x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x < 9.0e15).then_some(x as i64)
}

fn models(v: Option<&str>) -> Vec<String> {
    v.map(|s| {
        s.split('|')
            .map(|m| m.trim().to_owned())
            .filter(|m| !m.is_empty())
            .collect()
    })
    .unwrap_or_default()
}

/// Read a node list.
pub fn parse_nodes(text: &str, origin: &str) -> Result<Read<Node>, ClusterError> {
    let (h, rows) = split(text, origin)?;
    let (name, gpus) = (
        h.find(&["sn", "name", "node"]),
        h.find(&["gpu", "gpus", "num_gpu"]),
    );
    let (Some(name), Some(gpus)) = (name, gpus) else {
        return Err(missing(
            origin,
            &[(name, "sn (or name)"), (gpus, "gpu (or gpus)")],
        ));
    };
    let (cpu, mem, model) = (
        h.find(&["cpu_milli"]),
        h.find(&["memory_mib"]),
        h.find(&["model", "gpu_model"]),
    );
    let mut out = Read::default();
    for f in rows {
        let node = (|| -> Result<Node, &'static str> {
            let opt = |i: Option<usize>, why| match i {
                None => Ok(None),
                Some(_) => field(&f, i).and_then(count).map(Some).ok_or(why),
            };
            let n = Node {
                name: field(&f, Some(name)).ok_or("missing_name")?.to_owned(),
                cpu_milli: opt(cpu, "bad_cpu_milli")?,
                memory_mib: opt(mem, "bad_memory_mib")?,
                gpus: field(&f, Some(gpus))
                    .and_then(count)
                    .and_then(|g| u32::try_from(g).ok())
                    .filter(|g| *g <= 64)
                    .ok_or("bad_gpu")?,
                model: field(&f, model).unwrap_or_default().to_owned(),
            };
            if n.gpus > 0 && n.model.is_empty() {
                return Err("gpus_without_model");
            }
            Ok(n)
        })();
        match node {
            Ok(n) => out.items.push(n),
            Err(why) => *out.skipped.entry(why.to_owned()).or_default() += 1,
        }
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = out.items.iter().find(|n| !seen.insert(n.name.as_str())) {
        return Err(bad(origin, format!("node `{}` is listed twice", dup.name)));
    }
    if out.items.is_empty() {
        return Err(bad(
            origin,
            format!("no usable node{}", skips(&out.skipped)),
        ));
    }
    Ok(out)
}

struct PodCols {
    name: usize,
    gpus: usize,
    milli: Option<usize>,
    fraction: Option<usize>,
    cpu: Option<usize>,
    mem: Option<usize>,
    spec: Option<usize>,
    mig: Option<usize>,
}

/// Read a workload list.
pub fn parse_pods(text: &str, origin: &str) -> Result<Read<Pod>, ClusterError> {
    let (h, rows) = split(text, origin)?;
    let (name, gpus) = (
        h.find(&["name", "pod", "workload"]),
        h.find(&["num_gpu", "gpus"]),
    );
    let (Some(name), Some(gpus)) = (name, gpus) else {
        return Err(missing(
            origin,
            &[(name, "name"), (gpus, "num_gpu (or gpus)")],
        ));
    };
    let c = PodCols {
        name,
        gpus,
        milli: h.find(&["gpu_milli"]),
        fraction: h.find(&["gpu_fraction"]),
        cpu: h.find(&["cpu_milli"]),
        mem: h.find(&["memory_mib"]),
        spec: h.find(&["gpu_spec", "gpu_model"]),
        mig: h.find(&["mig_profile"]),
    };
    let mut out = Read::default();
    for f in rows {
        match pod_row(&f, &c) {
            Ok(p) => out.items.push(p),
            Err(why) => *out.skipped.entry(why.to_owned()).or_default() += 1,
        }
    }
    if out.items.is_empty() {
        return Err(bad(
            origin,
            format!("no usable workload{}", skips(&out.skipped)),
        ));
    }
    Ok(out)
}

fn pod_row(f: &[String], c: &PodCols) -> Result<Pod, &'static str> {
    let num = |i: Option<usize>, why| match field(f, i) {
        None => Ok(0),
        Some(v) => count(v).ok_or(why),
    };
    let num_gpu = field(f, Some(c.gpus))
        .and_then(count)
        .and_then(|g| u32::try_from(g).ok())
        .filter(|g| *g <= 64)
        .ok_or("bad_num_gpu")?;
    let milli = match (field(f, c.milli), field(f, c.fraction)) {
        (Some(v), _) => count(v).ok_or("bad_gpu_milli")?,
        (None, Some(v)) => v
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0 && *x <= 1.0)
            .map(|x| (x * 1000.0).round() as i64)
            .ok_or("bad_gpu_fraction")?,
        (None, None) => 1000,
    };
    let gpu_milli = match num_gpu {
        0 => 0,
        _ if !(1..=1000).contains(&milli) => return Err("gpu_milli_not_1_to_1000"),
        1 => milli as u32,
        _ if milli != 1000 => return Err("shared_gpus_on_a_multi_gpu_workload"),
        _ => 1000,
    };
    Ok(Pod {
        name: field(f, Some(c.name)).ok_or("missing_name")?.to_owned(),
        cpu_milli: num(c.cpu, "bad_cpu_milli")?,
        memory_mib: num(c.mem, "bad_memory_mib")?,
        num_gpu,
        gpu_milli,
        gpu_spec: models(field(f, c.spec)),
        mig_profile: field(f, c.mig).map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alibaba_lists_read_with_their_quirks() {
        let nodes = parse_nodes(
            "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,786432,8,V100M32\nn1,32000,262144,0,\nn2,1,2,2,\n",
            "nodes.csv",
        )
        .expect("nodes read");
        assert_eq!(nodes.items.len(), 2);
        assert_eq!(nodes.items[0].gpus, 8);
        assert_eq!(nodes.items[1].model, "");
        assert_eq!(nodes.skipped["gpus_without_model"], 1);
        let pods = parse_pods(
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n\
             p0,88000,327680,8,1000,,LS\n\
             p1,4000,15258,1,220,V100M16|V100M32,BE\n\
             p2,6000,100,0,0,,BE\n\
             p3,6000,100,2,500,,BE\n\
             p4,6000,100,1,1200,,BE\n",
            "pods.csv",
        )
        .expect("pods read");
        assert_eq!(pods.items.len(), 3);
        assert_eq!(pods.items[1].gpu_spec, ["V100M16", "V100M32"]);
        assert!(pods.items[1].is_share());
        assert_eq!(pods.items[0].total_milli(), 8000);
        assert_eq!(pods.items[2].kind(), "cpu-only");
        assert_eq!(pods.skipped["shared_gpus_on_a_multi_gpu_workload"], 1);
        assert_eq!(pods.skipped["gpu_milli_not_1_to_1000"], 1);
    }

    #[test]
    fn generic_workloads_take_fractions_and_defaults() {
        let p = parse_pods("workload,gpus,gpu_fraction\nw,1,0.25\nx,2,\n", "w.csv")
            .expect("workloads read");
        assert_eq!(p.items[0].gpu_milli, 250);
        assert_eq!(p.items[1].gpu_milli, 1000);
        assert_eq!(p.items[1].cpu_milli, 0);
    }

    #[test]
    fn quoted_names_keep_their_commas() {
        let p = parse_pods(
            "\u{feff}name,num_gpu,gpu_spec\n\"a, \"\"b\"\"\",1,\"T4|A10\"\n\n",
            "q.csv",
        )
        .expect("read");
        assert_eq!(p.items[0].name, "a, \"b\"");
        assert_eq!(p.items[0].gpu_spec, ["T4", "A10"]);
    }

    #[test]
    fn unreadable_lists_say_why() {
        assert!(parse_nodes("", "n.csv").is_err());
        assert!(
            parse_nodes("name,cpu\nx,1\n", "n.csv")
                .expect_err("unreadable")
                .to_string()
                .contains("n.csv")
        );
        assert!(
            parse_nodes("name,gpus,model\na,1,T4\na,1,T4\n", "n.csv")
                .expect_err("unreadable")
                .to_string()
                .contains("twice")
        );
        assert!(parse_pods("name,num_gpu\nx,-1\n", "p.csv").is_err());
    }
}
