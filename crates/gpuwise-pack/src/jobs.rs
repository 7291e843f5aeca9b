//! Jobs and pools.
//!
//! Jobs come as CSV with a header; columns are found by name:
//! - `job_id`; `submission_time` (or `submission_s`, `arrival_s`), seconds; `duration` (or
//!   `duration_s`), seconds at the requested GPUs; `num_gpu` (or `gpus`) — the Microsoft ITP
//!   traces' `raw/` files;
//! - optional `deadline` (or `deadline_s`), absolute seconds like the submission (the ITP
//!   `with_deadlines/` files); `priority` (larger first); `interruptible` (`true`/`false`,
//!   `1`/`0`); `pools` (allowed pool names, `|`-separated; empty: any).
//!
//! A row with a missing or bad field is skipped and counted by reason.

use std::collections::BTreeMap;

/// One job.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// Its name.
    pub id: String,
    /// Submission, seconds.
    pub submit_s: f64,
    /// Run time at its GPUs, seconds.
    pub duration_s: f64,
    /// GPUs it needs at once.
    pub gpus: u32,
    /// Finish by, seconds (absolute, like `submit_s`).
    pub deadline_s: Option<f64>,
    /// Larger runs first under the priority policy.
    pub priority: i64,
    /// May be stopped and resumed later (it checkpoints: it resumes where it stopped).
    pub interruptible: bool,
    /// Pools it may run on (empty: any).
    pub pools: Vec<String>,
}

/// A job list read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Jobs {
    /// The jobs, in file order.
    pub jobs: Vec<Job>,
    /// Rows skipped, by reason.
    pub skipped: BTreeMap<String, u64>,
}

/// A list or pool that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {message}")]
pub struct JobsError {
    origin: String,
    message: String,
}

fn bad(origin: &str, message: impl Into<String>) -> JobsError {
    JobsError {
        origin: origin.to_owned(),
        message: message.into(),
    }
}

/// Read a job list.
pub fn parse(text: &str, origin: &str) -> Result<Jobs, JobsError> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = lines
        .next()
        .ok_or_else(|| bad(origin, "empty: no header"))?;
    let cols: Vec<String> = header
        .trim_start_matches('\u{feff}')
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    let find = |names: &[&str]| cols.iter().position(|c| names.contains(&c.as_str()));
    let (Some(id), Some(submit), Some(duration), Some(gpus)) = (
        find(&["job_id", "id"]),
        find(&["submission_time", "submission_s", "arrival_s"]),
        find(&["duration", "duration_s"]),
        find(&["num_gpu", "gpus"]),
    ) else {
        return Err(bad(
            origin,
            format!(
                "header `{}` lacks job_id, submission_time, duration or num_gpu",
                header.chars().take(80).collect::<String>()
            ),
        ));
    };
    let deadline = find(&["deadline", "deadline_s"]);
    let priority = find(&["priority"]);
    let interruptible = find(&["interruptible"]);
    let pools = find(&["pools"]);
    let mut out = Jobs::default();
    for line in lines {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        match row(
            &f,
            id,
            submit,
            duration,
            gpus,
            [deadline, priority, interruptible, pools],
        ) {
            Ok(j) => out.jobs.push(j),
            Err(why) => *out.skipped.entry(why.to_owned()).or_default() += 1,
        }
    }
    if out.jobs.is_empty() {
        return Err(bad(origin, "no job with a submission, a duration and GPUs"));
    }
    Ok(out)
}

fn row(
    f: &[&str],
    id: usize,
    submit: usize,
    duration: usize,
    gpus: usize,
    [deadline, priority, interruptible, pools]: [Option<usize>; 4],
) -> Result<Job, &'static str> {
    let get = |i: usize| f.get(i).copied().filter(|v| !v.is_empty());
    let num = |i: usize, why: &'static str| -> Result<f64, &'static str> {
        get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or(why)
    };
    let job = Job {
        id: get(id).ok_or("missing_id")?.to_owned(),
        submit_s: num(submit, "bad_submission")?,
        duration_s: num(duration, "bad_duration")?,
        gpus: get(gpus)
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|g| *g > 0)
            .ok_or("bad_gpus")?,
        deadline_s: match deadline.and_then(get) {
            Some(v) => Some(
                v.parse::<f64>()
                    .ok()
                    .filter(|d| d.is_finite())
                    .ok_or("bad_deadline")?,
            ),
            None => None,
        },
        priority: match priority.and_then(get) {
            Some(v) => v.parse().map_err(|_| "bad_priority")?,
            None => 0,
        },
        interruptible: match interruptible.and_then(get) {
            Some("true" | "1" | "yes") => true,
            Some("false" | "0" | "no") | None => false,
            Some(_) => return Err("bad_interruptible"),
        },
        pools: pools
            .and_then(get)
            .map(|v| {
                v.split('|')
                    .map(|p| p.trim().to_owned())
                    .filter(|p| !p.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
    };
    if job.duration_s <= 0.0 {
        return Err("bad_duration");
    }
    Ok(job)
}

/// A pool of interchangeable GPUs at one price.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Pool {
    /// Its name.
    pub name: String,
    /// GPUs (`None`: unlimited).
    pub capacity: Option<u32>,
    /// USD per GPU-hour.
    pub usd_per_gpu_hour: f64,
}

impl Pool {
    /// `NAME=CAPACITY@PRICE`, the capacity a count or `unlimited`.
    pub fn parse(s: &str) -> Result<Self, JobsError> {
        let err = |m: &str| {
            bad(
                "--pool",
                format!(
                    "`{s}`: {m} (NAME=CAPACITY@PRICE, e.g. reserved=64@1.8 or cloud=unlimited@4.1)"
                ),
            )
        };
        let (name, rest) = s.split_once('=').ok_or_else(|| err("no `=`"))?;
        let (cap, price) = rest.split_once('@').ok_or_else(|| err("no `@PRICE`"))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(err("no name"));
        }
        let capacity = match cap.trim() {
            "unlimited" | "inf" => None,
            c => Some(
                c.parse::<u32>()
                    .map_err(|_| err("the capacity is not a count"))?,
            ),
        };
        let usd_per_gpu_hour = price
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|p| p.is_finite() && *p >= 0.0)
            .ok_or_else(|| err("the price is not a number of dollars"))?;
        Ok(Self {
            name: name.to_owned(),
            capacity,
            usd_per_gpu_hour,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn itp_and_generic_lists_and_pools() {
        let j = parse(
            "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\na,10,1,m,200,1,2,100\nb,x,1,m,1,1,1,1\nc,5,1,m,,1,0,3\n",
            "itp.csv",
        )
        .expect("itp");
        assert_eq!(j.jobs.len(), 1);
        assert_eq!(j.jobs[0].deadline_s, Some(200.0));
        assert_eq!((j.jobs[0].gpus, j.jobs[0].duration_s), (2, 100.0));
        assert_eq!(j.skipped["bad_submission"], 1);
        assert_eq!(j.skipped["bad_gpus"], 1);
        let g = parse(
            "job_id,arrival_s,duration_s,gpus,priority,interruptible,pools\nx,0,60,1,5,true,spot|cloud\n",
            "g.csv",
        )
        .expect("generic");
        assert!(g.jobs[0].interruptible);
        assert_eq!(g.jobs[0].pools, vec!["spot", "cloud"]);
        assert!(parse("a,b\n1,2\n", "x.csv").is_err());
        let p = Pool::parse("reserved=64@1.8").expect("pool");
        assert_eq!((p.capacity, p.usd_per_gpu_hour), (Some(64), 1.8));
        assert_eq!(
            Pool::parse("cloud=unlimited@4").expect("pool").capacity,
            None
        );
        for bad in ["x", "x=1", "=1@2", "x=a@1", "x=1@-2"] {
            assert!(Pool::parse(bad).is_err(), "{bad}");
        }
    }
}
