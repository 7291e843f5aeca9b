//! Which job held which GPU when, from the scheduler's records: the join's second path, for
//! samples whose labels do not name a job.
//!
//! A record names its nodes and its GPU count, and where it says (a job-mapping file, `sacct
//! --json`'s GRES detail) the indices. Where it does not, each job is given the **lowest free
//! indices** of each node at its start, in start order: Slurm's default selection on a node
//! without GPU topology. That is an assumption, and each job says which it got
//! ([`Binding`]). A device whose index the telemetry does not give is attributed only while one
//! job alone holds GPUs on its node.

use std::collections::{BTreeSet, HashMap};

use gpuwise_core::EpochMs;

use crate::record::{JobRecord, short_host};

/// How a job's GPUs were tied to devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Binding {
    /// The record named the GPU indices.
    Recorded,
    /// Lowest free indices at the job's start (Slurm's default; an assumption).
    LowestFree,
    /// The record names no node: its GPU time cannot be tied to a device.
    Unbound,
}

/// One stretch of time a job held a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hold {
    from: EpochMs,
    to: EpochMs,
    job: u32,
}

/// One job on one node: when, how many GPUs there, which (where recorded).
struct NodeSpan {
    start: EpochMs,
    end: EpochMs,
    job: u32,
    count: u32,
    recorded: Option<Vec<u32>>,
}

/// Who held each GPU (by short host name and index), and each node while one job alone held it.
#[derive(Clone, Debug, Default)]
pub struct Schedule {
    /// Each device's holds (and each node's sole holder's), in time order.
    lanes: Vec<Vec<Hold>>,
    by_gpu: HashMap<(String, u32), usize>,
    sole: HashMap<String, usize>,
    /// Each job's binding, by its place in the records.
    pub bindings: Vec<Binding>,
}

/// The GPUs `gpus` held over `nodes` nodes: as even as can be, the first nodes one more.
fn per_node(gpus: u32, nodes: usize, i: usize) -> u32 {
    let n = u32::try_from(nodes.max(1)).unwrap_or(u32::MAX);
    gpus / n + u32::from((u32::try_from(i).unwrap_or(u32::MAX)) < gpus % n)
}

impl Schedule {
    /// The holds of `jobs` (numbered by their place); a running job holds until `open_end`.
    #[must_use]
    pub fn of(jobs: &[JobRecord], open_end: EpochMs) -> Self {
        let mut s = Schedule {
            bindings: vec![Binding::Unbound; jobs.len()],
            ..Self::default()
        };
        let mut per_host: HashMap<String, Vec<NodeSpan>> = HashMap::new();
        for (i, j) in jobs.iter().enumerate() {
            let Some(start) = j.start_ms else { continue };
            let end = j.end_ms.unwrap_or(open_end).max(start);
            if j.gpus == 0 || j.nodes.is_empty() || end == start {
                continue;
            }
            let job = u32::try_from(i).unwrap_or(u32::MAX);
            s.bindings[i] = if j.gpu_indices.is_some() {
                Binding::Recorded
            } else {
                Binding::LowestFree
            };
            for (k, node) in j.nodes.iter().enumerate() {
                let host = short_host(node);
                let recorded = j.gpu_indices.as_ref().map(|all| {
                    all.iter()
                        .find(|(n, _)| short_host(n) == host)
                        .map(|(_, ix)| ix.clone())
                        .unwrap_or_default()
                });
                let count = per_node(j.gpus, j.nodes.len(), k);
                per_host.entry(host).or_default().push(NodeSpan {
                    start,
                    end,
                    job,
                    count,
                    recorded,
                });
            }
        }
        for (host, mut spans) in per_host {
            spans.sort_by_key(|x| (x.start, x.job));
            s.sole.insert(host.clone(), s.lanes.len());
            s.lanes.push(sole_holds(&spans));
            for (index, hold) in assign(&spans) {
                let lane = *s.by_gpu.entry((host.clone(), index)).or_insert_with(|| {
                    s.lanes.push(Vec::new());
                    s.lanes.len() - 1
                });
                s.lanes[lane].push(hold);
            }
        }
        for holds in &mut s.lanes {
            holds.sort_by_key(|h| (h.from, h.job));
        }
        s
    }

    /// Whether any job held GPUs on `host` (a short name).
    #[must_use]
    pub fn knows(&self, host: &str) -> bool {
        self.sole.contains_key(host)
    }

    /// The holds of the device `index` on `host` (without an index: the node's sole holder),
    /// looked up once per device; `None` when no job ever held it.
    #[must_use]
    pub fn lane(&self, host: &str, index: Option<u32>) -> Option<Lane> {
        match index {
            Some(ix) => self.by_gpu.get(&(host.to_owned(), ix)),
            None => self.sole.get(host),
        }
        .map(|l| Lane(*l))
    }

    /// Split `[from, to)` of a device among the jobs of its lane ([`Schedule::lane`]), calling
    /// `f(job, from, to)` for each piece in time order (`job` is `None` where no job held it).
    pub fn split_lane(
        &self,
        lane: Option<Lane>,
        from: EpochMs,
        to: EpochMs,
        mut f: impl FnMut(Option<u32>, EpochMs, EpochMs),
    ) {
        let Some(Lane(lane)) = lane else {
            f(None, from, to);
            return;
        };
        let holds = &self.lanes[lane];
        let mut t = from;
        // The first hold that ends after `from`: holds of one GPU are sorted and, inferred,
        // disjoint; recorded ones that overlap go to the one that started first.
        let first = holds.partition_point(|h| h.to <= from);
        for h in &holds[first..] {
            if h.from >= to {
                break;
            }
            if h.to <= t {
                continue;
            }
            if h.from > t {
                f(None, t, h.from);
                t = h.from;
            }
            let end = h.to.min(to);
            f(Some(h.job), t, end);
            t = end;
            if t >= to {
                return;
            }
        }
        if t < to {
            f(None, t, to);
        }
    }
}

/// The holds of one device (or one node's sole holder), by number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lane(usize);

/// Give each job on one node its GPU indices: recorded ones as recorded, the others the lowest
/// free at its start.
fn assign(spans: &[NodeSpan]) -> Vec<(u32, Hold)> {
    let mut out = Vec::new();
    // (end, index) of the GPUs in use.
    let mut busy: BTreeSet<(EpochMs, u32)> = BTreeSet::new();
    let mut used: BTreeSet<u32> = BTreeSet::new();
    for NodeSpan {
        start,
        end,
        job,
        count,
        recorded,
    } in spans
    {
        while let Some(&(e, ix)) = busy.first()
            && e <= *start
        {
            busy.pop_first();
            used.remove(&ix);
        }
        let indices: Vec<u32> = match recorded {
            Some(ix) => ix.clone(),
            None => (0..)
                .filter(|i| !used.contains(i))
                .take(*count as usize)
                .collect(),
        };
        for ix in indices {
            used.insert(ix);
            busy.insert((*end, ix));
            out.push((
                ix,
                Hold {
                    from: *start,
                    to: *end,
                    job: *job,
                },
            ));
        }
    }
    out
}

/// The stretches of time one job alone held GPUs on a node.
fn sole_holds(spans: &[NodeSpan]) -> Vec<Hold> {
    let mut events: Vec<(EpochMs, bool, u32)> = Vec::new();
    for s in spans {
        events.push((s.start, true, s.job));
        events.push((s.end, false, s.job));
    }
    // Ends before starts at one instant.
    events.sort_by_key(|(t, starts, job)| (*t, *starts, *job));
    let mut active: BTreeSet<u32> = BTreeSet::new();
    let mut out: Vec<Hold> = Vec::new();
    let mut i = 0;
    while i < events.len() {
        let t = events[i].0;
        while i < events.len() && events[i].0 == t {
            let (_, starts, job) = events[i];
            if starts {
                active.insert(job);
            } else {
                active.remove(&job);
            }
            i += 1;
        }
        let next = events.get(i).map(|e| e.0);
        if let (Some(next), 1) = (next, active.len()) {
            let job = *active.first().unwrap_or(&0);
            match out.last_mut() {
                Some(h) if h.job == job && h.to == t => h.to = next,
                _ => out.push(Hold {
                    from: t,
                    to: next,
                    job,
                }),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Source;

    fn job(start: EpochMs, end: Option<EpochMs>, gpus: u32, nodes: &[&str]) -> JobRecord {
        let mut j = JobRecord::new("j", Source::Slurm);
        j.start_ms = Some(start);
        j.end_ms = end;
        j.gpus = gpus;
        j.nodes = nodes.iter().map(|n| (*n).to_owned()).collect();
        j
    }

    fn pieces(
        s: &Schedule,
        host: &str,
        ix: Option<u32>,
        a: i64,
        b: i64,
    ) -> Vec<(Option<u32>, i64, i64)> {
        let mut v = Vec::new();
        s.split_lane(s.lane(host, ix), a, b, |j, x, y| v.push((j, x, y)));
        v
    }

    #[test]
    fn lowest_free_indices_in_start_order() {
        // Job 0 holds 2 GPUs 0–100, job 1 two more 10–50, job 2 two 60–90 (gets 2,3 again).
        let jobs = [
            job(0, Some(100), 2, &["n1"]),
            job(10, Some(50), 2, &["N1.example"]),
            job(60, Some(90), 2, &["n1"]),
        ];
        let s = Schedule::of(&jobs, 1000);
        assert_eq!(
            pieces(&s, "n1", Some(0), 0, 200),
            [(Some(0), 0, 100), (None, 100, 200)]
        );
        assert_eq!(
            pieces(&s, "n1", Some(2), 0, 100),
            [
                (None, 0, 10),
                (Some(1), 10, 50),
                (None, 50, 60),
                (Some(2), 60, 90),
                (None, 90, 100)
            ]
        );
        assert_eq!(pieces(&s, "n1", Some(4), 0, 10), [(None, 0, 10)]);
        // Without an index: only while one job alone held the node.
        assert_eq!(
            pieces(&s, "n1", None, 0, 120),
            [
                (Some(0), 0, 10),
                (None, 10, 50),
                (Some(0), 50, 60),
                (None, 60, 90),
                (Some(0), 90, 100),
                (None, 100, 120)
            ]
        );
        assert_eq!(s.bindings, [Binding::LowestFree; 3]);
    }

    #[test]
    fn recorded_indices_multi_node_and_open_jobs() {
        let mut a = job(0, None, 4, &["n1", "n2"]);
        a.gpu_indices = Some(vec![("n1".into(), vec![3, 5]), ("n2".into(), vec![0, 1])]);
        let b = job(0, Some(10), 3, &["n3", "n4"]);
        let s = Schedule::of(&[a, b, job(5, None, 0, &["n1"])], 40);
        assert_eq!(
            pieces(&s, "n1", Some(5), 0, 50),
            [(Some(0), 0, 40), (None, 40, 50)]
        );
        assert_eq!(pieces(&s, "n1", Some(0), 0, 50), [(None, 0, 50)]);
        // Three GPUs over two nodes: two on the first, one on the second.
        assert_eq!(pieces(&s, "n3", Some(1), 0, 10), [(Some(1), 0, 10)]);
        assert_eq!(pieces(&s, "n4", Some(1), 0, 10), [(None, 0, 10)]);
        assert_eq!(
            s.bindings,
            [Binding::Recorded, Binding::LowestFree, Binding::Unbound]
        );
    }
}
