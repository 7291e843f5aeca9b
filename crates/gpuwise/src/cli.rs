//! Command-line arguments. Only this module knows about clap; `commands` turns these into
//! settings (flag > environment > config file > default).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const REPORT_EXAMPLES: &str = "Examples:
  gpuwise report logs/                        # every file below logs/, formats detected
  gpuwise report node-a.csv.gz --tz Europe/Berlin
  gpuwise report 'scrapes/*.prom' --group-by namespace --format html > report.html
  gpuwise report gpu.log --columns timestamp,uuid,utilization.gpu,memory.used,memory.total
  gpuwise report export.csv --map timestamp=ts,device=gpu_id,util=value
  nvidia-smi dmon -o DT | gpuwise report - --host $(hostname)
  gpuwise report --prometheus http://prometheus:9090 --last 7d --selector '{namespace=~\"ml-.*\"}'
  gpuwise report --prometheus http://prometheus:9090 --last 6h --path raw   # every sample, as the files";

/// gpuwise: where your GPU money goes, how much of it is wasted, and why.
#[derive(Debug, Parser)]
#[command(name = "gpuwise", version, about, long_about = None, propagate_version = true)]
#[command(
    after_help = "Start with `gpuwise demo`. Exit codes: 0 ok, 1 budget exceeded (--max-idle-share), 2 error."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Fleet waste report from GPU telemetry files or a Prometheus-compatible store.
    #[command(after_help = REPORT_EXAMPLES)]
    Report(Box<ReportArgs>),
    /// Write a synthetic week of a 52-GPU fleet, report on it, print where the HTML report is.
    #[command(after_help = "Example:\n  gpuwise demo --out /tmp/gpuwise-demo")]
    Demo(DemoArgs),
    /// GPU specifications, cloud instances and prices; refresh them from public catalogs.
    #[command(subcommand)]
    Catalog(CatalogCommand),
    /// Generate a synthetic fleet of any size, with its planted truth.
    #[command(
        after_help = "Example:\n  gpuwise generate --out fleet --gpus 200 --days 7 --interval 30s --format dcgm --seed 7"
    )]
    Generate(GenerateArgs),
    /// Ranked actions with monthly dollar savings, evidence and confidence.
    #[command(after_help = ADVISE_EXAMPLES)]
    Advise(Box<AdviseArgs>),
    /// Which GPU a model needs: memory, throughput and cost per token on every GPU.
    #[command(after_help = PLAN_EXAMPLES, args_conflicts_with_subcommands = true)]
    Plan(Box<PlanCommand>),
    /// Sample the GPUs of this machine through NVML into nvidia-smi CSV logs (no DCGM needed).
    #[command(after_help = RECORD_EXAMPLES)]
    Record(RecordArgs),
    /// Who spent what: cost by team (showback or chargeback), unit costs, month-end forecast.
    #[command(after_help = ALLOCATE_EXAMPLES)]
    Allocate(Box<AllocateArgs>),
    /// Check FOCUS cloud bills against GPU telemetry: unmonitored, unbilled, billed-not-reporting.
    #[command(after_help = RECONCILE_EXAMPLES)]
    Reconcile(Box<ReconcileArgs>),
    /// Budgets and guardrails over the fleet: list violations, exit 1 if any, notify a webhook.
    #[command(
        after_help = CHECK_EXAMPLES,
        mut_arg("inputs", |a| a.required_unless_present_any(["prometheus", "emit_rules"]))
    )]
    Check(Box<CheckArgs>),
    /// What-if on real traces: training on spot, commitments, serving with batching and autoscaling.
    #[command(subcommand)]
    Simulate(SimulateCommand),
    /// A live dashboard, a JSON API and /metrics over growing telemetry files or a store.
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(Box<ServeArgs>),
    /// Run a job queue over GPU pools by a policy: deadlines, completion times, cost, a bound.
    #[command(after_help = SCHEDULE_EXAMPLES)]
    Schedule(ScheduleArgs),
    /// Place workloads on nodes by a policy (FGD, best-fit, …): allocation, fragmentation, placements.
    #[command(after_help = PACK_EXAMPLES)]
    Pack(Box<PackArgs>),
    /// Per job: GPU-hours, cost, utilization, memory and flags, from Slurm or MLflow and the telemetry.
    #[command(after_help = JOBS_EXAMPLES)]
    Jobs(Box<JobsArgs>),
    /// Keep history: roll telemetry up into the store (per device and hour, Parquet by day).
    #[command(after_help = ROLLUP_EXAMPLES)]
    Rollup(Box<RollupArgs>),
    /// The monthly cost review from the store: trends, movers, new waste, realized savings.
    #[command(after_help = REVIEW_EXAMPLES)]
    Review(Box<ReviewArgs>),
    /// What `advise --log` recommended; mark an action done or rejected.
    #[command(after_help = ACTIONS_EXAMPLES)]
    Actions(ActionsArgs),
}

const ROLLUP_EXAMPLES: &str = "Examples:
  gpuwise rollup logs/                          # into ~/.local/share/gpuwise/store
  gpuwise rollup logs/ --store /var/lib/gpuwise/store --retain 400d --compact-after 35d
  gpuwise report --store /var/lib/gpuwise/store --since 2026-10-01 --until 2026-11-01
  duckdb -c \"SELECT host, sum(covered_ms)/3.6e6 AS gpu_hours FROM read_parquet('store/tiles/*/*.parquet', hive_partitioning=true) GROUP BY host\"";

const REVIEW_EXAMPLES: &str = "Examples:
  gpuwise review --month 2026-10 --store /var/lib/gpuwise/store --teams teams.toml --cloud aws
  gpuwise review --quarter 2026-Q3 --format html -o q3.html
  gpuwise review --month 2026-11 --policy policy.toml     # month-end forecast against budgets";

const ACTIONS_EXAMPLES: &str = "Examples:
  gpuwise advise logs/ --store DIR --log          # record what was recommended
  gpuwise actions --store DIR                      # list them, with their state
  gpuwise actions --store DIR done a1b2c3 --date 2026-10-15
  gpuwise actions --store DIR reject a1b2c3 --reason \"owned hardware, no saving\"";

/// `gpuwise rollup`.
#[derive(Debug, Args)]
pub(crate) struct RollupArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// Tile length: the finest window the store answers (a whole number of minutes that
    /// divides a day).
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub tile: String,
    /// Remove days older than this (e.g. 400d).
    #[arg(long, value_name = "DURATION")]
    pub retain: Option<String>,
    /// Join the tiles of days older than this into one per device and day (e.g. 35d).
    #[arg(long, value_name = "DURATION")]
    pub compact_after: Option<String>,
    /// Output format of the summary.
    #[arg(long, short = 'f', value_name = "table|json")]
    pub format: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// `gpuwise review`.
#[derive(Debug, Args)]
pub(crate) struct ReviewArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// The month to review, YYYY-MM (UTC).
    #[arg(long, value_name = "YYYY-MM", required_unless_present = "quarter")]
    pub month: Option<String>,
    /// The quarter to review, YYYY-Qn (UTC), against the quarters before it.
    #[arg(long, value_name = "YYYY-Qn", conflicts_with = "month")]
    pub quarter: Option<String>,
    /// Periods before it to compare with.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub history: u32,
    /// Budgets (a policy's `[budget]`, docs/policy.md) for the month-end forecast.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Workload hints (TOML; kinds and interruptible work, docs/advise.md).
    #[arg(long, value_name = "FILE")]
    pub workloads: Option<PathBuf>,
    /// Job records (as `gpuwise jobs` takes them) for cost per run, per successful run, per
    /// 1,000 requests and queue wait per period; the join needs the periods' telemetry files.
    #[command(flatten)]
    pub jobs: JobSources,
    /// Output format.
    #[arg(
        long,
        short = 'f',
        env = "GPUWISE_FORMAT",
        value_name = "table|json|markdown|html"
    )]
    pub format: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// `gpuwise actions`.
#[derive(Debug, Args)]
pub(crate) struct ActionsArgs {
    /// History store holding the journal [default: $GPUWISE_STORE, else the user's data
    /// directory].
    #[arg(long, env = "GPUWISE_STORE", value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// Output format of the list.
    #[arg(long, short = 'f', value_name = "table|json|markdown|csv")]
    pub format: Option<String>,
    #[command(subcommand)]
    pub mark: Option<ActionMark>,
}

/// Marks on an action.
#[derive(Debug, Subcommand)]
pub(crate) enum ActionMark {
    /// List the actions and their state (the default).
    List,
    /// Mark an action done (its realized saving is measured from that date).
    Done {
        /// The action's id (or a unique prefix of it).
        id: String,
        /// When it was done, YYYY-MM-DD or RFC 3339 [default: now].
        #[arg(long, value_name = "TIME")]
        date: Option<String>,
        /// A note kept with the mark.
        #[arg(long)]
        note: Option<String>,
    },
    /// Mark an action rejected, with the reason.
    Reject {
        /// The action's id (or a unique prefix of it).
        id: String,
        /// Why.
        #[arg(long, required = true)]
        reason: String,
    },
}

const JOBS_EXAMPLES: &str = "Examples:
  sacct --parsable2 --allocations -S 2026-10-01 -E 2026-11-01 \\
    --format=JobID,JobIDRaw,JobName,User,Account,Partition,QOS,Submit,Start,End,Elapsed,Timelimit,State,ExitCode,AllocTRES,NodeList \\
    > jobs.txt
  gpuwise jobs dcgm/ --sacct jobs.txt --tz America/New_York
  gpuwise jobs dcgm/ --slurm --since 2026-10-01 --until 2026-11-01 --format html -o jobs.html
  gpuwise jobs logs/ --sacct jobs.txt --mlflow http://127.0.0.1:5000 --quality-metric eval_accuracy
  gpuwise jobs logs/ --sacct jobs.txt --fail-on-idle-cost 500     # exit 1 above $500 of idle jobs
  gpuwise jobs --prometheus http://prometheus:9090 --kube --last 7d   # pods as jobs

GPU samples are tied to jobs by the job their labels name (dcgm-exporter's `hpc_job`, jobstats'
`jobid`) or the pod dcgm-exporter maps it to, else by node, GPU index and time from the scheduler's record (lowest free indices at a
job's start where the record has none). docs/jobs.md.";

/// Where and how a command posts a message (`check`'s outcome, `jobs`' per-user digests).
#[derive(Debug, Args, Clone)]
pub(crate) struct NotifyArgs {
    /// POST to this URL (Slack incoming webhook or any JSON endpoint): https, or http to loopback.
    #[arg(
        long,
        env = "GPUWISE_NOTIFY_URL",
        hide_env_values = true,
        value_name = "URL",
        help_heading = "Notify"
    )]
    pub notify: Option<String>,
    /// Body to post: slack (text + blocks) or generic (the command's own JSON).
    #[arg(
        long,
        default_value = "slack",
        value_name = "STYLE",
        help_heading = "Notify"
    )]
    pub notify_format: String,
    /// Print the message instead of posting it (to stderr).
    #[arg(long, help_heading = "Notify")]
    pub dry_run: bool,
    /// Time allowed for each notification attempt.
    #[arg(
        long,
        default_value = "10s",
        value_name = "DURATION",
        help_heading = "Notify"
    )]
    pub notify_timeout: String,
    /// Attempts after the first when posting fails (5xx, 429 or no connection).
    #[arg(long, default_value_t = 2, value_name = "N", help_heading = "Notify")]
    pub notify_retries: u32,
}

/// Where jobs come from (`gpuwise jobs`, and `gpuwise serve`'s /api/jobs).
#[derive(Debug, Args, Default, Clone)]
pub(crate) struct JobSources {
    /// Slurm accounting: `sacct --parsable2` output, or `-` for stdin (repeatable).
    #[arg(long, value_name = "FILE", help_heading = "Jobs")]
    pub sacct: Vec<PathBuf>,
    /// Run `sacct` for the window (--since/--until, else the last day) instead of a file.
    #[arg(long, help_heading = "Jobs")]
    pub slurm: bool,
    /// Pods that request GPUs, from kube-state-metrics in the --prometheus store, as jobs.
    #[arg(long, requires = "prometheus", help_heading = "Jobs")]
    pub kube: bool,
    /// MLflow tracking server: runs name their job (tag slurm_job_id or pod), experiment and quality.
    #[arg(
        long,
        env = "GPUWISE_MLFLOW",
        value_name = "URL",
        help_heading = "Jobs"
    )]
    pub mlflow: Option<String>,
    /// Runs exported from MLflow's or W&B's CSV download (repeatable).
    #[arg(long, value_name = "FILE", help_heading = "Jobs")]
    pub runs_csv: Vec<PathBuf>,
    /// The run metric whose cost per unit is shown (MLflow or the CSV).
    #[arg(long, value_name = "NAME", help_heading = "Jobs")]
    pub quality_metric: Option<String>,
    /// Requests served, for the cost per 1,000 requests: a counter per pod in the store
    /// (with --kube), or a run metric (MLflow, the CSV).
    #[arg(
        long,
        default_value = "vllm:request_success_total",
        value_name = "NAME",
        help_heading = "Jobs"
    )]
    pub requests_metric: String,
}

/// `gpuwise jobs`.
#[derive(Debug, Args)]
pub(crate) struct JobsArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,
    #[command(flatten)]
    pub sources: JobSources,
    /// Flag a job idle for at least this long at its end [default: 1h].
    #[arg(long, value_name = "DURATION", help_heading = "Jobs")]
    pub idle_tail: Option<String>,
    /// Flag a job whose memory peak is below this share of its GPU's, % [default: 25].
    #[arg(long, value_name = "PCT", help_heading = "Jobs")]
    pub memory_share: Option<f64>,
    /// Flag a job whose mean utilization is below this, % [default: 20].
    #[arg(long, value_name = "PCT", help_heading = "Jobs")]
    pub low_utilization: Option<f64>,
    /// Flag only jobs whose GPUs were observed for at least this long in all [default: 15m].
    #[arg(long, value_name = "DURATION", help_heading = "Jobs")]
    pub min_observed: Option<String>,
    /// Post each user's wasteful jobs (flags with their evidence) with --notify.
    #[command(flatten)]
    pub notify: NotifyArgs,
    /// Only users whose flagged jobs' idle time cost at least this many dollars get a digest.
    #[arg(
        long,
        default_value_t = 0.0,
        value_name = "USD",
        help_heading = "Notify"
    )]
    pub digest_min_idle_cost: f64,
    /// Exit 1 when the jobs' idle GPU time cost more than this many dollars.
    #[arg(long, value_name = "USD", help_heading = "Jobs")]
    pub fail_on_idle_cost: Option<f64>,
    /// Output format.
    #[arg(
        long,
        short = 'f',
        env = "GPUWISE_FORMAT",
        value_name = "table|json|csv|markdown|html",
        help_heading = "Output"
    )]
    pub format: Option<String>,
    /// Rows of the jobs table (table and Markdown).
    #[arg(long, default_value_t = 20, help_heading = "Output")]
    pub top: usize,
    #[command(flatten)]
    pub out: OutputArgs,
}

const SCHEDULE_EXAMPLES: &str = "Examples:
  gpuwise schedule cluster08.csv --pool reserved=512@1.8 --pool cloud=unlimited@4.1 --policy cost-aware
  gpuwise schedule jobs.csv --pool a100=64@2.5 --policy priority --format json
  gpuwise schedule with_deadlines/cluster10.csv --pool p=128@2 --policy edf --format csv -o stretches.csv

Jobs: CSV job_id,submission_time,duration,num_gpu[,deadline] (the Microsoft ITP traces) or with
priority, interruptible and pools columns. Policies: fifo, edf, priority (stops interruptible
jobs of lower priority), backfill (EASY), cost-aware (the cheapest pool while the deadline
allows). docs/schedule.md.";

/// `gpuwise schedule`.
#[derive(Debug, Args)]
pub(crate) struct ScheduleArgs {
    /// Job list (CSV).
    #[arg(value_name = "JOBS")]
    pub jobs: PathBuf,
    /// A pool: NAME=CAPACITY@PRICE (GPUs, or `unlimited`; USD per GPU-hour); repeatable, tried
    /// in this order (cost-aware: cheapest first).
    #[arg(long = "pool", value_name = "NAME=CAPACITY@PRICE", required = true)]
    pub pools: Vec<String>,
    /// fifo, edf, priority, backfill or cost-aware.
    #[arg(long, default_value = "fifo")]
    pub policy: String,
    /// Output format: table, json, markdown, csv (one row per stretch of a job).
    #[arg(long, short = 'f', env = "GPUWISE_FORMAT", value_name = "FORMAT")]
    pub format: Option<String>,
    /// Write to FILE (whole or not at all) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

const PACK_EXAMPLES: &str = "Examples:
  gpuwise pack openb_pod_list_default.csv --nodes openb_node_list_gpu_node.csv --load 1.3 --shuffle
  gpuwise pack workloads.csv --nodes nodes.csv --policy best-fit --format json
  gpuwise pack requests.csv --nodes a100s.csv --policy mig
  gpuwise pack --consolidate report.json --format markdown

Workloads: CSV name,num_gpu[,gpu_milli|gpu_fraction][,cpu_milli,memory_mib,gpu_spec,mig_profile]
(the Alibaba openb_pod_list files read as they are). Nodes: CSV sn|name,gpu[,cpu_milli,memory_mib,
model]. Policies: first-fit, best-fit, dot-product, gpu-packing, gpu-clustering, random, fgd, mig.
--load 1.3 --shuffle is the FGD paper's protocol (the list shuffled, then pruned or extended by
random copies to 130 % of the cluster's GPUs). --consolidate packs each device of a `report
--format json` onto as few GPUs as fit its peak memory and p95 utilization. docs/pack.md.";

/// `gpuwise pack`.
#[derive(Debug, Args)]
pub(crate) struct PackArgs {
    /// Workload list (CSV).
    #[arg(value_name = "WORKLOADS", required_unless_present = "consolidate")]
    pub workloads: Option<PathBuf>,
    /// Node list (CSV).
    #[arg(long, value_name = "NODES", required_unless_present = "consolidate")]
    pub nodes: Option<PathBuf>,
    /// first-fit, best-fit, dot-product, gpu-packing, gpu-clustering, random, fgd or mig.
    #[arg(long, default_value = "fgd")]
    pub policy: String,
    /// Prune or extend the list by random copies until the GPUs asked for are this share of
    /// the cluster's (1.3 = 130 %).
    #[arg(long, value_name = "SHARE")]
    pub load: Option<f64>,
    /// Shuffle the list before placing (the FGD paper's protocol) instead of keeping its order.
    #[arg(long)]
    pub shuffle: bool,
    /// Seed of the shuffle, the copies and the tie-breaks.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Pack the devices of a `gpuwise report --format json` onto fewer GPUs instead.
    #[arg(long, value_name = "REPORT_JSON", conflicts_with_all = ["workloads", "nodes", "load", "shuffle", "seed", "policy"])]
    pub consolidate: Option<PathBuf>,
    /// With --consolidate: GPU capacity kept free on every GPU (0.1 packs to 90 %).
    #[arg(long, default_value_t = 0.1, requires = "consolidate")]
    pub headroom: f64,
    /// Output format: table, json, markdown, csv (one row per workload or device).
    #[arg(long, short = 'f', env = "GPUWISE_FORMAT", value_name = "FORMAT")]
    pub format: Option<String>,
    /// Write to FILE (whole or not at all) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

const SERVE_EXAMPLES: &str = "Examples:
  gpuwise serve /var/log/gpu/                       # http://127.0.0.1:8080/
  gpuwise serve logs/ --teams teams.toml --policy policy.toml --refresh 10s
  GPUWISE_TOKEN=$(openssl rand -hex 16) gpuwise serve logs/ --listen 0.0.0.0:8080 \\
    --token-env GPUWISE_TOKEN --allowed-host gpu-dash.internal \\
    --tls-cert cert.pem --tls-key key.pem               # HTTPS, Secure session cookie
  gpuwise serve --prometheus http://prometheus:9090 --store-windows-per-minute 32
  curl 'http://127.0.0.1:8080/api/report?last=7d'

Routes: / (dashboard), /device?id=ID, /api/report, /api/advice, /api/allocation, /metrics,
/healthz; each takes
?last=7d or ?start=2026-01-05&end=2026-01-11 (windows are whole tiles, --tile).";

/// `gpuwise serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// With any of them: /api/jobs and the jobs page (each request joins its window afresh).
    #[command(flatten)]
    pub jobs: JobSources,
    #[command(flatten)]
    pub advise: AdviseOpts,
    #[command(flatten)]
    pub alloc: AllocateOpts,
    /// Address to listen on, or a bare port (on 127.0.0.1); one not on loopback needs
    /// --token-env [default: 127.0.0.1:8080]. `--port` is the same flag.
    #[arg(
        long,
        visible_alias = "port",
        env = "GPUWISE_LISTEN",
        value_name = "ADDR|PORT",
        help_heading = "Server"
    )]
    pub listen: Option<String>,
    /// Environment variable holding the bearer token every request (but /healthz) must carry.
    #[arg(long, value_name = "VAR", help_heading = "Server")]
    pub token_env: Option<String>,
    /// A name clients may reach the server by (repeatable), besides localhost, 127.0.0.1,
    /// `[::1]` and the address listened on: requests naming any other host (a DNS-rebinding
    /// page) are refused with 421.
    #[arg(long = "allowed-host", value_name = "NAME", help_heading = "Server")]
    pub allowed_hosts: Vec<String>,
    /// How often files are looked at again (and a store's answers kept) [default: 30s].
    #[arg(long, value_name = "DURATION", help_heading = "Server")]
    pub refresh: Option<String>,
    /// Distinct windows one client (by address) may ask in a minute of the store (with
    /// --prometheus; windows already answered are not counted) and of the jobs' join
    /// (/api/jobs, /jobs); more are refused with 429 until the minute has passed.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 16,
        value_parser = clap::value_parser!(u16).range(1..),
        help_heading = "Server"
    )]
    pub store_windows_per_minute: u16,
    /// Serve HTTPS with this certificate chain (PEM; with --tls-key), so a token or session
    /// cookie is never sent in clear off loopback.
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_key",
        help_heading = "Server"
    )]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_cert",
        help_heading = "Server"
    )]
    pub tls_key: Option<std::path::PathBuf>,
    /// Tile length: samples are kept per device and tile, and windows are whole tiles [default: 1d].
    #[arg(long, value_name = "DURATION", help_heading = "Server")]
    pub tile: Option<String>,
    /// Data kept, back from the newest sample [default: 35d].
    #[arg(long, value_name = "DURATION", help_heading = "Server")]
    pub retain: Option<String>,
    /// Longest a request may take [default: 30s].
    #[arg(long, value_name = "DURATION", help_heading = "Server")]
    pub request_timeout: Option<String>,
    /// Policy file whose `[budget]` the dashboard's budget burn shows (docs/policy.md).
    #[arg(
        long,
        env = "GPUWISE_POLICY",
        value_name = "FILE",
        help_heading = "Server"
    )]
    pub policy: Option<PathBuf>,
    /// Config file (default: $GPUWISE_CONFIG, else ./gpuwise.toml if present).
    #[arg(
        long,
        env = "GPUWISE_CONFIG",
        value_name = "FILE",
        help_heading = "Server"
    )]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum SimulateCommand {
    /// Replay spot traces for a training job: policies, cost, deadlines, checkpoint interval.
    #[command(after_help = SPOT_EXAMPLES)]
    Spot(Box<SpotArgs>),
    /// How many GPUs to commit to (1 or 3 years) from the fleet's hourly busy GPUs.
    #[command(after_help = COMMIT_EXAMPLES)]
    Commit(Box<CommitArgs>),
    /// Replay inference traffic: GPUs, replicas, batching and autoscaling for a latency target.
    #[command(after_help = SERVE_SIM_EXAMPLES)]
    Serve(Box<ServeSimArgs>),
}

const SERVE_SIM_EXAMPLES: &str = "Examples:
  gpuwise simulate serve --trace AzureLLMInferenceTrace_conv.csv --model llama-3-8b --gpu H100-SXM5-80GB --replicas 2
  gpuwise simulate serve --trace conv.csv --model llama-3-8b --gpu L4 --autoscale 'target=0.7,min=0,max=16,cooldown=5m,startup=90s'
  gpuwise simulate serve --trace conv.csv --model llama-3-70b --tp 4 --gpu H100-SXM5-80GB,A100-SXM4-80GB \\
      --replicas 1,2,4 --max-batch 32,128 --slo-ttft-ms 2000 --slo-tpot-ms 100 --sweep --format html -o serve.html
  gpuwise simulate serve --rates chunk-1-trace.csv --lengths-from conv.csv --seed 7 --model llama-3-8b --gpu A10G

Traces: Azure 2023 (TIMESTAMP,ContextTokens,GeneratedTokens), Mooncake
(timestamp_ms,input_length,output_length), or arrival_s,input_tokens,output_tokens; ServeGen
rate windows with --rates. Step times are the planner's roofline (docs/planner.md) unless
--profile gives measured ones. docs/simulate.md.";

/// `gpuwise simulate serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeSimArgs {
    /// Request trace (Azure 2023, Mooncake or arrival_s,input_tokens,output_tokens CSV).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "rates",
        help_heading = "Traffic"
    )]
    pub trace: Option<PathBuf>,
    /// ServeGen rate windows (window_start_s,rate,cv,…) to draw arrivals from, instead of a trace.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "trace",
        requires = "lengths_from",
        help_heading = "Traffic"
    )]
    pub rates: Option<PathBuf>,
    /// A request trace whose token counts the --rates arrivals draw.
    #[arg(long, value_name = "FILE", help_heading = "Traffic")]
    pub lengths_from: Option<PathBuf>,
    /// Seed of the --rates arrivals.
    #[arg(long, default_value_t = 1, help_heading = "Traffic")]
    pub seed: u64,
    /// Multiply the --rates by this (a whole service's totals are hundreds of requests a second).
    #[arg(long, default_value_t = 1.0, help_heading = "Traffic")]
    pub rate_scale: f64,
    /// Model: a preset (`gpuwise plan models`).
    #[arg(long, value_name = "NAME", help_heading = "Service")]
    pub model: Option<String>,
    /// Model from a Hugging Face config.json.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "model",
        help_heading = "Service"
    )]
    pub hf_config: Option<PathBuf>,
    /// Precision of the weights (bf16, fp8, int8, int4, …) [default: the planner's].
    #[arg(long, help_heading = "Service")]
    pub precision: Option<String>,
    /// Tensor-parallel GPUs per replica.
    #[arg(long, default_value_t = 1, help_heading = "Service")]
    pub tp: u32,
    /// Precision of the KV cache (bf16, fp8, …) [default: the planner's].
    #[arg(long, help_heading = "Service")]
    pub kv_precision: Option<String>,
    /// GPU(s) from the catalog; a comma list is swept with --sweep.
    #[arg(long, value_name = "NAME[,NAME…]", help_heading = "Service")]
    pub gpu: String,
    /// Price of one GPU-hour, USD [default: the catalog's, in --cloud/--region/--pricing].
    #[arg(value_parser = usd, long, value_name = "USD", help_heading = "Service")]
    pub price: Option<f64>,
    /// Cloud of the catalog price.
    #[arg(long, help_heading = "Service")]
    pub cloud: Option<String>,
    /// Region of the catalog price.
    #[arg(long, help_heading = "Service")]
    pub region: Option<String>,
    /// Pricing model of the catalog price (on-demand, spot, 1y, 3y).
    #[arg(long, help_heading = "Service")]
    pub pricing: Option<String>,
    /// Measured decode step times: CSV `batch,step_ms` (overrides the roofline's decode time).
    #[arg(long, value_name = "FILE", help_heading = "Service")]
    pub profile: Option<PathBuf>,
    /// Replicas (a comma list is swept) [default: 1; with --sweep 1,2,4,8,16].
    #[arg(
        long,
        value_name = "N[,N…]",
        conflicts_with = "autoscale",
        help_heading = "Scaling"
    )]
    pub replicas: Option<String>,
    /// Autoscaling (repeatable, to sweep): target=0.7,min=0,max=16,cooldown=5m,startup=90s,
    /// interval=15s,warm=0,metric=utilization|queue, and policy=reactive (default), predictive (also hold the load of
    /// one period before: period=1d or 7d) or schedule (replicas by hour of the period, from
    /// a reactive run on the same trace).
    #[arg(long, value_name = "SETTINGS", help_heading = "Scaling")]
    pub autoscale: Vec<String>,
    /// Of the --replicas, this many run on spot capacity, preempted as --spot-trace says (their
    /// requests go back to the queue, progress lost).
    #[arg(
        long,
        value_name = "N",
        requires = "spot_trace",
        help_heading = "Scaling"
    )]
    pub spot: Option<u32>,
    /// Spot availability over time (SkyPilot JSON, add/remove events CSV or time_s,available CSV;
    /// repeated when the traffic is longer).
    #[arg(long, value_name = "FILE", requires = "spot", help_heading = "Scaling")]
    pub spot_trace: Option<PathBuf>,
    /// Spot price of one GPU-hour, USD [default: the catalog's spot price].
    #[arg(value_parser = usd, long, value_name = "USD", help_heading = "Scaling")]
    pub spot_price: Option<f64>,
    /// Seconds per tick of a CSV spot trace.
    #[arg(long, default_value = "10m", help_heading = "Scaling")]
    pub spot_tick: String,
    /// Sequences per batch, 1 = no batching (a comma list is swept) [default: 64; with --sweep
    /// 16,64,256].
    #[arg(long, value_name = "N[,N…]", help_heading = "Batching")]
    pub max_batch: Option<String>,
    /// continuous (mixed prompt chunks and decodes per iteration, vLLM with chunked prefill),
    /// prompts-first (an iteration prefills waiting prompts or decodes, vLLM without it) or
    /// static.
    #[arg(long, default_value = "continuous", help_heading = "Batching")]
    pub batching: String,
    /// Prompt tokens one iteration computes at most (continuous batching).
    #[arg(long, default_value_t = 8192, help_heading = "Batching")]
    pub token_budget: u32,
    /// Longest a request waits for a static batch to fill.
    #[arg(long, default_value = "200ms", help_heading = "Batching")]
    pub batch_timeout: String,
    /// Time-to-first-token objective, ms.
    #[arg(long, value_name = "MS", help_heading = "Objective")]
    pub slo_ttft_ms: Option<f64>,
    /// Time-per-output-token objective, ms.
    #[arg(long, value_name = "MS", help_heading = "Objective")]
    pub slo_tpot_ms: Option<f64>,
    /// Try every GPU × replicas (or autoscaling) × batch limit; choose the cheapest that meets
    /// the SLO for ≥ 99 % of requests; show the cost–latency front. Without lists it sweeps
    /// replicas 1,2,4,8,16 × batch limits 16,64,256 on the GPUs given.
    #[arg(long, help_heading = "Objective")]
    pub sweep: bool,
    /// Output format: table, json, markdown, html.
    #[arg(
        long,
        short = 'f',
        env = "GPUWISE_FORMAT",
        value_name = "FORMAT",
        help_heading = "Output"
    )]
    pub format: Option<String>,
    /// Write to FILE (whole or not at all) instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE", help_heading = "Output")]
    pub output: Option<PathBuf>,
}

const COMMIT_EXAMPLES: &str = "Examples:
  gpuwise simulate commit logs/ --gpu H100-SXM5-80GB --cloud gcp
  gpuwise simulate commit --prometheus http://prom:9090 --last 30d --on-demand-price 4.1 --commit-1y-price 2.9 --commit-3y-price 1.9
  gpuwise simulate commit logs/ --gpu A100-SXM4-80GB --cloud gcp --interruptible-label namespace=batch --format json

A GPU is busy in an hour it spent mostly out of idle episodes; the fleet is one pool of
interchangeable GPUs (read one model's devices at a time). docs/simulate.md.";

#[derive(Debug, Args)]
pub(crate) struct CommitArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// GPU model whose catalog prices to use (on-demand, 1y, 3y, spot) in --cloud/--region.
    #[arg(long, value_name = "NAME", help_heading = "Commitment")]
    pub gpu: Option<String>,
    /// On-demand $ per GPU-hour (instead of --gpu).
    #[arg(value_parser = usd, long, value_name = "USD", help_heading = "Commitment")]
    pub on_demand_price: Option<f64>,
    /// 1-year commitment $ per GPU-hour.
    #[arg(
        value_parser = usd,
        long = "commit-1y-price",
        value_name = "USD",
        help_heading = "Commitment"
    )]
    pub commit_1y_price: Option<f64>,
    /// 3-year commitment $ per GPU-hour.
    #[arg(
        value_parser = usd,
        long = "commit-3y-price",
        value_name = "USD",
        help_heading = "Commitment"
    )]
    pub commit_3y_price: Option<f64>,
    /// Spot $ per GPU-hour, for interruptible demand.
    #[arg(value_parser = usd, long, value_name = "USD", help_heading = "Commitment")]
    pub spot_price: Option<f64>,
    /// Devices with this label (key=value) are interruptible: on spot, never committed.
    #[arg(long, value_name = "KEY=VALUE", help_heading = "Commitment")]
    pub interruptible_label: Option<String>,
    /// Share of the demand above the commitment that may run on spot, %.
    #[arg(
        long,
        default_value_t = 0.0,
        value_name = "PCT",
        help_heading = "Commitment"
    )]
    pub spot_share: f64,
    /// Output format.
    #[arg(
        long,
        short = 'f',
        env = "GPUWISE_FORMAT",
        value_name = "table|json|markdown",
        help_heading = "Output"
    )]
    pub format: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

const SPOT_EXAMPLES: &str = "Examples:
  gpuwise simulate spot --trace 'traces/*.json' --work-hours 48 --deadline-hours 60 --changeover 12m
  gpuwise simulate spot --trace us-west-2a_v100_1.json --work-hours 72 --deadline-hours 100 \\
      --spot-price 0.92 --on-demand-price 3.06 --checkpoint-interval auto --checkpoint-cost 2m
  gpuwise simulate spot --trace p3trace.csv --tick 60s --nodes 16 --work-hours 8 --instance a2-highgpu-1g --cloud gcp

Traces: SkyPilot spot-traces JSON, add/remove event CSV (time_ms,event,node), or time_s,available
CSV. Several --trace files are several scenarios, reported per trace and pooled. docs/simulate.md.";

#[derive(Debug, Args)]
pub(crate) struct SpotArgs {
    /// Trace files (globs allowed; repeatable).
    #[arg(
        long = "trace",
        required = true,
        value_name = "FILE",
        help_heading = "Traces"
    )]
    pub traces: Vec<String>,
    /// A zone group for the multi_zone policy: trace files of zones of one region,
    /// comma-separated (repeatable: one group each).
    #[arg(long, value_name = "FILE,FILE,…", help_heading = "Traces")]
    pub zones: Vec<String>,
    /// auto (by content), skypilot (JSON), events (time_ms,event,node) or csv (time_s,available).
    #[arg(
        long,
        default_value = "auto",
        value_name = "FORMAT",
        help_heading = "Traces"
    )]
    pub trace_format: String,
    /// Tick the event and CSV traces are sampled at.
    #[arg(
        long,
        default_value = "60s",
        value_name = "DURATION",
        help_heading = "Traces"
    )]
    pub tick: String,
    /// Use only the first HOURS of each trace (a number of hours, or a duration: 13d).
    #[arg(long, value_name = "HOURS", value_parser = hours, help_heading = "Traces")]
    pub trace_hours: Option<f64>,
    /// Hours of progress the job needs (a number of hours, or a duration: 2d).
    #[arg(long, value_name = "HOURS", value_parser = hours, help_heading = "Job")]
    pub work_hours: f64,
    /// Instances the job runs on (spot needs that many available).
    #[arg(long, default_value_t = 1, value_name = "N", help_heading = "Job")]
    pub nodes: u32,
    /// Hours from the start by which the job must finish (none: spot policies wait for spot).
    #[arg(long, value_name = "HOURS", value_parser = hours, help_heading = "Job")]
    pub deadline_hours: Option<f64>,
    /// Time lost at every launch before progress resumes.
    #[arg(
        long,
        default_value = "12m",
        value_name = "DURATION",
        help_heading = "Job"
    )]
    pub changeover: String,
    /// Progress between checkpoints: 0 (the paper's model: a preemption loses only the
    /// changeover), a duration, or auto (the best interval on the traces).
    #[arg(
        long,
        default_value = "0",
        value_name = "DURATION|auto",
        help_heading = "Job"
    )]
    pub checkpoint_interval: String,
    /// Time each checkpoint takes.
    #[arg(
        long,
        default_value = "0",
        value_name = "DURATION",
        help_heading = "Job"
    )]
    pub checkpoint_cost: String,
    /// Policies to run (repeatable): on_demand, spot_only, greedy, uniform_progress, omniscient
    /// (the offline optimum, with a deadline), multi_zone (with --zones) [default: all that apply].
    #[arg(long = "policy", value_name = "POLICY", help_heading = "Simulation")]
    pub policies: Vec<String>,
    /// Random start offsets per trace (1–10,000; each takes about 20 ms per trace).
    #[arg(
        long,
        default_value_t = 300,
        value_name = "N",
        help_heading = "Simulation"
    )]
    pub starts: usize,
    /// Seed of the start offsets.
    #[arg(
        long,
        default_value_t = 1,
        value_name = "N",
        help_heading = "Simulation"
    )]
    pub seed: u64,
    /// Spot $ per node-hour (with --on-demand-price; instead of --instance).
    #[arg(value_parser = usd, long, value_name = "USD", help_heading = "Prices")]
    pub spot_price: Option<f64>,
    /// On-demand $ per node-hour.
    #[arg(value_parser = usd, long, value_name = "USD", help_heading = "Prices")]
    pub on_demand_price: Option<f64>,
    /// Instance type whose catalog prices to use (one node = one instance).
    #[arg(long, value_name = "TYPE", help_heading = "Prices")]
    pub instance: Option<String>,
    /// GPU whose catalog GPU-hour prices to use (one node = one GPU), in --cloud/--region.
    #[arg(long, value_name = "NAME", help_heading = "Prices")]
    pub gpu: Option<String>,
    /// Cloud of --instance or --gpu.
    #[arg(long, value_name = "CLOUD", help_heading = "Prices")]
    pub cloud: Option<String>,
    /// Region of --instance or --gpu [default: the cheapest with both prices].
    #[arg(long, value_name = "REGION", help_heading = "Prices")]
    pub region: Option<String>,
    /// Output format.
    #[arg(
        long,
        short = 'f',
        default_value = "table",
        value_name = "table|json|markdown",
        help_heading = "Output"
    )]
    pub format: String,
    /// Write to FILE instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE", help_heading = "Output")]
    pub output: Option<PathBuf>,
}

const ALLOCATE_EXAMPLES: &str = "Examples:
  gpuwise allocate logs/ --teams teams.toml
  gpuwise allocate logs/ --teams teams.toml --mode chargeback --idle proportional --shared-team platform
  gpuwise allocate logs/ --teams teams.toml --units tokens.csv --format json
  gpuwise allocate logs/ --teams teams.toml --format focus -o gpu-allocation.csv   # FOCUS 1.2 rows

Each device-hour goes to the team that owned the device at that hour (teams.toml, docs/teams.md),
else to (untagged). Months are UTC. Policies and columns: docs/ledger.md.";

const RECONCILE_EXAMPLES: &str = "Examples:
  gpuwise reconcile --bill focus-2026-11.csv.gz logs/ --prices prices.toml
  gpuwise reconcile --bill export.parquet --join id scrapes/ --format json
  gpuwise reconcile --bill bill.csv --join tag:hostname --team-tag cost-center logs/

Reads FOCUS 1.0–1.2 (CSV, gzip/zstd CSV, Parquet). Schema gpuwise.reconcile/v1: docs/ledger.md.";

const CHECK_EXAMPLES: &str = "Examples:
  gpuwise check logs/ --policy policy.toml --teams teams.toml
  gpuwise check logs/ --policy policy.toml --teams teams.toml --notify \"$SLACK_WEBHOOK\" --dry-run
  gpuwise check --prometheus http://prom:9090 --last 7d --policy policy.toml --format json
  gpuwise check --policy policy.toml --emit-rules > gpuwise-rules.yml   # rules for Prometheus

Exit codes: 0 every rule passes, 1 a rule is violated, 2 error. Policy file: docs/policy.md.";

/// How cost is allocated to teams (`allocate` and `check`).
#[derive(Debug, Args, Default, Clone)]
#[command(next_help_heading = "Allocation")]
pub(crate) struct AllocateOpts {
    /// showback (costs as they fell) or chargeback (idle and shared cost moved by --idle) [default: showback].
    #[arg(long, env = "GPUWISE_ALLOCATION_MODE", value_name = "MODE")]
    pub mode: Option<String>,
    /// Where idle and shared cost go in chargeback: owner, proportional, even, platform:NAME [default: proportional].
    #[arg(long, value_name = "POLICY")]
    pub idle: Option<String>,
    /// A team whose whole cost is shared like idle cost in chargeback (repeatable).
    #[arg(long = "shared-team", value_name = "TEAM")]
    pub shared_teams: Vec<String>,
    /// Work per team and month for unit costs: CSV team,period,tokens|jobs (period 2026-11).
    #[arg(long, value_name = "FILE")]
    pub units: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct AllocateArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,
    #[command(flatten)]
    pub alloc: AllocateOpts,
    /// Output format (focus: FOCUS 1.2 CSV rows per device, team and day).
    #[arg(
        long,
        short = 'f',
        env = "GPUWISE_FORMAT",
        value_name = "table|json|csv|markdown|focus",
        help_heading = "Output"
    )]
    pub format: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub(crate) struct ReconcileArgs {
    /// FOCUS bill files: CSV (plain, .gz, .zst) or Parquet (repeatable).
    #[arg(long, required = true, value_name = "FILE", help_heading = "Bill")]
    pub bill: Vec<PathBuf>,
    /// How bill rows meet hosts: name (ResourceName), id (ResourceId) or tag:KEY.
    #[arg(
        long,
        default_value = "name",
        value_name = "KEY",
        help_heading = "Bill"
    )]
    pub join: String,
    /// The bill tag that names a resource's team.
    #[arg(
        long,
        default_value = "team",
        value_name = "KEY",
        help_heading = "Bill"
    )]
    pub team_tag: String,
    /// A billed-minus-reported gap counts above this many GPU-hours (and --gap-share).
    #[arg(
        long,
        default_value_t = 3.0,
        value_name = "HOURS",
        help_heading = "Bill"
    )]
    pub gap_hours: f64,
    /// … and above this share of the billed GPU-hours, %.
    #[arg(
        long,
        default_value_t = 10.0,
        value_name = "PCT",
        help_heading = "Bill"
    )]
    pub gap_share: f64,
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// Output format.
    #[arg(
        long,
        short = 'f',
        env = "GPUWISE_FORMAT",
        value_name = "table|json|csv|markdown",
        help_heading = "Output"
    )]
    pub format: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub(crate) struct CheckArgs {
    /// Policy file (TOML): budgets, idle share, notebooks, long jobs, spot share, stale telemetry.
    #[arg(
        long,
        env = "GPUWISE_POLICY",
        value_name = "FILE",
        help_heading = "Policy"
    )]
    pub policy: Option<PathBuf>,
    #[command(flatten)]
    pub notify: NotifyArgs,
    /// Print the policy as Prometheus recording and alerting rules (YAML) instead of checking,
    /// so the same guardrails fire in Alertmanager between runs; the rules Prometheus cannot
    /// hold are named on stderr (docs/policy.md).
    #[arg(long, help_heading = "Policy")]
    pub emit_rules: bool,
    /// Workload hints (TOML, docs/advise.md): devices hinted `notebook` are notebooks.
    #[arg(long, value_name = "FILE", help_heading = "Policy")]
    pub workloads: Option<PathBuf>,
    /// Also notify when every rule passes.
    #[arg(long, help_heading = "Notify")]
    pub notify_always: bool,
    #[command(flatten)]
    pub fleet: FleetArgs,
    #[command(flatten)]
    pub alloc: AllocateOpts,
    /// Output format.
    #[arg(
        long,
        short = 'f',
        env = "GPUWISE_FORMAT",
        value_name = "table|json|markdown",
        help_heading = "Output"
    )]
    pub format: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

const RECORD_EXAMPLES: &str = "Examples:
  gpuwise record --out /var/log/gpuwise                 # until stopped (SIGTERM/Ctrl-C flush)
  gpuwise record --out gpu-logs --duration 48h --interval 5s
  gpuwise record --out gpu-logs --prometheus-listen 9400   # also serve /metrics on 127.0.0.1:9400
  GPUWISE_TOKEN=… gpuwise record --out gpu-logs --prometheus-listen 0.0.0.0:9400 --token-env GPUWISE_TOKEN
  gpuwise report gpu-logs                               # read back what was recorded

Writes OUT/HOST.csv (nvidia-smi --query-gpu CSV, UTC) and OUT/processes/HOST.csv (per-process
GPU memory with container and pod); rotated files become HOST.csv-YYYYMMDDHHMMSS.gz.
Exit codes: 0 stopped or done, 2 error (no NVIDIA driver: at once, with no files written).";

#[derive(Debug, Args)]
pub(crate) struct RecordArgs {
    /// Directory for the logs (created if missing).
    #[arg(long, env = "GPUWISE_RECORD_OUT", value_name = "DIR")]
    pub out: PathBuf,
    /// Time between samples [default: 10s].
    #[arg(long, env = "GPUWISE_RECORD_INTERVAL", value_name = "DURATION")]
    pub interval: Option<String>,
    /// Time between writes to disk with fsync; a crash loses at most this much [default: 60s].
    #[arg(long, value_name = "DURATION")]
    pub flush: Option<String>,
    /// Stop after this long [default: until SIGTERM or Ctrl-C].
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Start a new file when the log passes this size, MiB [default: 64].
    #[arg(long, value_name = "MIB")]
    pub rotate_mib: Option<u64>,
    /// Start a new file when the log is this old [default: 1d].
    #[arg(long, value_name = "DURATION")]
    pub rotate_every: Option<String>,
    /// Host name in file names [default: this machine's].
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// Do not write the per-process log.
    #[arg(long)]
    pub no_processes: bool,
    /// Also serve the latest readings as OpenMetrics at http://ADDR/metrics; a bare PORT listens
    /// on 127.0.0.1 only. An address others can reach needs --token-env, as `serve` does.
    #[arg(long, value_name = "ADDR|PORT")]
    pub prometheus_listen: Option<String>,
    /// Environment variable holding the bearer token /metrics requires (Prometheus sends it
    /// with `authorization: {credentials_file: …}` in the scrape config).
    #[arg(long, value_name = "VAR", requires = "prometheus_listen")]
    pub token_env: Option<String>,
}

const ADVISE_EXAMPLES: &str = "Examples:
  gpuwise advise logs/ --cloud aws --region us-east-1
  gpuwise advise scrapes/ --workloads workloads.toml --allow-clouds gcp,azure --format json
  gpuwise report logs/ --advise --format html -o report.html";

#[derive(Debug, Args)]
pub(crate) struct AdviseArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,
    #[command(flatten)]
    pub advise: AdviseOpts,
    /// Output format.
    #[arg(
        long,
        short = 'f',
        env = "GPUWISE_FORMAT",
        value_name = "table|json|markdown",
        help_heading = "Output"
    )]
    pub format: Option<String>,
    /// Actions shown in detail in table and markdown output.
    #[arg(long, value_name = "N", help_heading = "Output")]
    pub top: Option<usize>,
    /// Record the actions in the store's journal (`gpuwise actions`), to follow what they
    /// realize (--store, else the default store).
    #[arg(long, help_heading = "Output")]
    pub log: bool,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// What the fleet is read from and how it is read and analysed (`report` and `advise`).
#[derive(Debug, Args, Clone)]
pub(crate) struct FleetArgs {
    /// Files, directories, globs, or `-` for stdin (.gz and .zst are decompressed).
    /// (One of INPUT, --prometheus or --store is needed; `review` reads the default store.)
    #[arg(value_name = "INPUT")]
    pub inputs: Vec<String>,
    #[command(flatten)]
    pub prom: PromArgs,
    /// History store (`gpuwise rollup`): whole hours it holds come from it, the rest from
    /// the inputs or --prometheus (raw samples).
    #[arg(long, env = "GPUWISE_STORE", value_name = "DIR")]
    pub store: Option<PathBuf>,
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
}

/// Where the output goes and what configures the run (`report` and `advise`).
#[derive(Debug, Args)]
pub(crate) struct OutputArgs {
    /// Write to FILE instead of stdout (the file appears whole or not at all).
    #[arg(long, short = 'o', value_name = "FILE", help_heading = "Output")]
    pub output: Option<PathBuf>,
    /// Config file (default: $GPUWISE_CONFIG, else ./gpuwise.toml if present).
    #[arg(
        long,
        env = "GPUWISE_CONFIG",
        value_name = "FILE",
        help_heading = "Output"
    )]
    pub config: Option<PathBuf>,
    /// No progress display.
    #[arg(long, help_heading = "Output")]
    pub no_progress: bool,
}

/// What the advice may assume and propose.
#[derive(Debug, Args, Default, Clone)]
#[command(next_help_heading = "Advice")]
pub(crate) struct AdviseOpts {
    /// Workload hints (TOML): kind, interruptible, latency target, model per device, host or
    /// label. See docs/advise.md.
    #[arg(long, value_name = "FILE")]
    pub workloads: Option<PathBuf>,
    /// Clouds actions may move work to, besides --cloud (comma-separated or repeated).
    #[arg(long, value_delimiter = ',', value_name = "CLOUD")]
    pub allow_clouds: Vec<String>,
    /// Memory a target GPU must have over the observed peak [default: 1.2].
    #[arg(long, value_name = "FACTOR")]
    pub headroom: Option<f64>,
    /// Idle time after which a session holding memory is culled [default: 30m].
    #[arg(long, value_name = "DURATION")]
    pub idle_timeout: Option<String>,
    /// Time to write one checkpoint, for spot advice [default: 5m].
    #[arg(long, value_name = "DURATION")]
    pub checkpoint_cost: Option<String>,
    /// Mean time between spot interruptions [default: 12h].
    #[arg(long, value_name = "DURATION")]
    pub spot_mtbi: Option<String>,
}

const PLAN_EXAMPLES: &str = "Examples:
  gpuwise plan --model llama-3-70b --mode infer --precision int4 --batch 8 --context 8192
  gpuwise plan --model llama-3.1-8b --mode train --tokens 2e9 --checkpointing full
  gpuwise plan --model mistral-7b --mode lora --gpu A100 --gpu L40S --format json
  gpuwise plan --hf-config ./config.json --max-latency-ms 30 --cloud aws --cloud gcp
  gpuwise plan --params 13b --mode qlora --budget 500
  gpuwise plan --model llama-3.1-70b --mode train --checkpointing full --network-gbps 800
  gpuwise plan --model llama-3.1-8b --mode train --precision bf16 --checkpointing full \\
    --optimizer paged_adamw8bit --optimizer-in-backward true --activation-offload true \\
    --framework torchtune --gpu L4
  gpuwise plan --model llama-3.1-8b --mode train --seq 65536 --cp 4 --gpus 8 --zero 3 \\
    --framework torchtitan --checkpointing full --gpu H100-SXM5-80GB
  gpuwise plan --model bert-large --mode train --framework hf --batch 8 --seq 512 \\
    --optimizer-impl foreach --gpu H200-SXM-141GB --format json   # eager: timed by kernels
  gpuwise plan --model llama-2-7b --mode qlora --lora-rank 32 --lora-targets q+v --seq 512
  gpuwise plan --workload job.toml
  gpuwise plan models
  gpuwise plan validate ../shared/data/planner-calibration.csv tests/data/plan/development.csv";

#[derive(Debug, Args)]
pub(crate) struct PlanCommand {
    #[command(subcommand)]
    pub sub: Option<PlanSub>,
    #[command(flatten)]
    pub args: PlanArgs,
}

#[derive(Debug, Subcommand)]
pub(crate) enum PlanSub {
    /// Check the planner against measured numbers (cases CSV), per case and per metric.
    Validate(ValidateArgs),
    /// The built-in model presets.
    Models(ModelsArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ValidateArgs {
    /// Cases files: `id,metric,measured,unit,workload,tolerance_pct,source,trust[,class]`
    /// (several are reported file by file, then together).
    #[arg(required = true)]
    pub cases: Vec<PathBuf>,
    /// Output format.
    #[arg(
        long,
        short = 'f',
        default_value = "table",
        value_name = "table|json|csv|markdown"
    )]
    pub format: String,
    /// Exit 1 when fewer than PCT % of memory cases are within tolerance.
    #[arg(long, value_name = "PCT")]
    pub require_memory: Option<f64>,
    /// Exit 1 when fewer than PCT % of throughput cases are within tolerance.
    #[arg(long, value_name = "PCT")]
    pub require_throughput: Option<f64>,
    /// The catalog the cases' GPUs are found in (an `--overlay` adds cards it lacks).
    #[command(flatten)]
    pub catalog: CatalogSourceArgs,
}

#[derive(Debug, Args)]
pub(crate) struct ModelsArgs {
    /// Output format.
    #[arg(
        long,
        short = 'f',
        default_value = "table",
        value_name = "table|json|csv|markdown"
    )]
    pub format: String,
}

/// `gpuwise plan` flags. Each workload flag sets the key of the same name (dashes for
/// underscores) that a `--workload` TOML file and `plan validate` workloads use; a flag
/// overrides the file.
#[derive(Debug, Args, Default)]
pub(crate) struct PlanArgs {
    /// A built-in model (`gpuwise plan models` lists them).
    #[arg(long, group = "model_source")]
    pub model: Option<String>,
    /// A Hugging Face config.json (`--config` is the gpuwise config file everywhere).
    #[arg(long, group = "model_source", value_name = "PATH")]
    pub hf_config: Option<PathBuf>,
    /// A bare parameter count (7b, 350m); the shape is assumed and said so.
    #[arg(long, group = "model_source", value_name = "COUNT")]
    pub params: Option<String>,
    /// Workload file (TOML): the keys below, plus model / hf_config / params.
    #[arg(long, value_name = "FILE")]
    pub workload: Option<PathBuf>,
    /// train, lora, qlora or infer [default: infer].
    #[arg(long)]
    pub mode: Option<String>,
    /// fp32, tf32, fp16, bf16, amp_fp16, amp_bf16, fp8, int8, int4, int4_g32, q8_0, q4_0, q4_k_m, nf4.
    #[arg(long)]
    pub precision: Option<String>,
    /// KV cache precision [default: 16-bit].
    #[arg(long)]
    pub kv_precision: Option<String>,
    /// adamw, adam, adam8bit, paged_adamw8bit, adafactor, sgd [default: adamw].
    #[arg(long)]
    pub optimizer: Option<String>,
    /// Micro-batch per GPU (training) or concurrent sequences (inference) [default: 1].
    #[arg(long)]
    pub batch: Option<String>,
    /// Gradient accumulation steps.
    #[arg(long)]
    pub ga: Option<String>,
    /// Training sequence length [default: 2048 or the model's context].
    #[arg(long)]
    pub seq: Option<String>,
    /// Prompt tokens [default: 512].
    #[arg(long)]
    pub prompt: Option<String>,
    /// Generated tokens per request [default: 256] (`-o/--output` is the output file
    /// everywhere).
    #[arg(long, value_name = "N")]
    pub output_tokens: Option<String>,
    /// KV cache tokens per sequence [default: prompt + output].
    #[arg(long)]
    pub context: Option<String>,
    /// none, selective or full [default: none].
    #[arg(long)]
    pub checkpointing: Option<String>,
    /// Step each parameter in the backward pass and free its gradient (torchtune's
    /// `optimizer_in_bwd`): true or false [default: false].
    #[arg(long, value_name = "BOOL")]
    pub optimizer_in_backward: Option<String>,
    /// Keep weights, gradients and optimizer states in host memory (FSDP CPU offload,
    /// DeepSpeed ZeRO-Offload): true or false [default: false].
    #[arg(long, value_name = "BOOL")]
    pub cpu_offload: Option<String>,
    /// Keep the activations saved for the backward pass in host memory (torchtune's and TRL's
    /// activation offloading): true or false [default: false].
    #[arg(long, value_name = "BOOL")]
    pub activation_offload: Option<String>,
    /// The loss: `chunked` (logits upcast to fp32 a chunk at a time, torchtune's
    /// `CEWithChunkedOutputLoss`) or `full` [default: chunked under torchtune, else full].
    #[arg(long, value_name = "chunked|full")]
    pub loss: Option<String>,
    /// true or false [default: true].
    #[arg(long, value_name = "BOOL")]
    pub flash_attention: Option<String>,
    /// `torch.compile` on: true or false. Under an eager framework (`--framework hf`) it times
    /// the step at the large-model utilization instead of kernel by kernel.
    #[arg(long, value_name = "BOOL")]
    pub compile: Option<String>,
    /// What `zero_grad` does with gradients between steps: `free` (set to None, PyTorch's
    /// default since 2.0) or `keep` (zeroed in place, its default before) [default: free].
    #[arg(long, value_name = "keep|free")]
    pub zero_grad: Option<String>,
    /// The optimizer's implementation: `foreach` (PyTorch's multi-tensor step: one fp32 copy
    /// of the parameters as workspace), `fused` or `for_loop` (none) [default: none counted].
    #[arg(long, value_name = "foreach|fused|for_loop")]
    pub optimizer_impl: Option<String>,
    /// The layers that carry LoRA adapters: q, k, v, o, gate, up, down, mlp, attn or all,
    /// joined by `+` or `,` (PEFT's q_proj … names too) [default: all].
    #[arg(long, value_name = "LIST")]
    pub lora_targets: Option<String>,
    /// ZeRO stage 0–3 (3 = FSDP).
    #[arg(long)]
    pub zero: Option<String>,
    /// Tensor parallel degree (fixes the layout instead of trying 1, 2, 4, … GPUs).
    #[arg(long)]
    pub tp: Option<String>,
    /// Pipeline parallel degree.
    #[arg(long)]
    pub pp: Option<String>,
    /// Context parallel degree: each training sequence split over this many GPUs (ring
    /// attention; fixes the layout).
    #[arg(long)]
    pub cp: Option<String>,
    /// GPUs in all (fixes the count).
    #[arg(long)]
    pub gpus: Option<String>,
    /// LoRA rank [default: 8].
    #[arg(long)]
    pub lora_rank: Option<String>,
    /// Framework: changes selective checkpointing, loss and mixed-precision storage.
    #[arg(long)]
    pub framework: Option<String>,
    /// Tokens to train on (train) or to generate (infer) [default: 1e9 train, 1e6 infer].
    #[arg(long)]
    pub tokens: Option<String>,
    /// Only these GPUs (names or families such as A100; repeatable).
    #[arg(long)]
    pub gpu: Vec<String>,
    /// Only these clouds (repeatable).
    #[arg(long)]
    pub cloud: Vec<String>,
    /// Only this pricing model: on-demand, spot, 1y, 3y [default: all].
    #[arg(long)]
    pub pricing: Option<String>,
    /// Network bandwidth of each machine, Gbit/s, for training options that span machines
    /// [default: the catalog's figure for the instance type; without one such options are
    /// not priced].
    #[arg(long, value_name = "GBPS")]
    pub network_gbps: Option<f64>,
    /// Most GPUs per option [default: 8 infer, 64 train].
    #[arg(long)]
    pub max_gpus: Option<u32>,
    /// Most time per output token, ms.
    #[arg(long)]
    pub max_latency_ms: Option<f64>,
    /// Fewest tokens/s, all GPUs.
    #[arg(long)]
    pub min_tokens_per_s: Option<f64>,
    /// Finish the tokens within this long (48h, 3d).
    #[arg(long, value_name = "DURATION")]
    pub deadline: Option<String>,
    /// Most dollars for the tokens.
    #[arg(long, value_name = "USD")]
    pub budget: Option<f64>,
    /// Training model-FLOPs utilization to assume instead of the per-GPU defaults (0–1).
    #[arg(long)]
    pub mfu: Option<f64>,
    /// Output format.
    #[arg(
        long,
        short = 'f',
        default_value = "table",
        value_name = "table|json|csv|markdown"
    )]
    pub format: String,
    /// Options shown in table and markdown output.
    #[arg(long, default_value_t = 15)]
    pub top: usize,
    /// Write to FILE instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub catalog: CatalogSourceArgs,
}

#[derive(Debug, Args)]
pub(crate) struct ReportArgs {
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// Output format.
    #[arg(
        long,
        short = 'f',
        env = "GPUWISE_FORMAT",
        value_name = "table|json|csv|markdown|html",
        help_heading = "Output"
    )]
    pub format: Option<String>,
    /// Rows of the device table in table and markdown output.
    #[arg(long, value_name = "N", help_heading = "Output")]
    pub top: Option<usize>,
    /// Exit with code 1 when the fleet's idle share of GPU-hours is above PCT (for CI budgets).
    #[arg(long, value_name = "PCT", help_heading = "Output")]
    pub max_idle_share: Option<f64>,
    #[command(flatten)]
    pub out: OutputArgs,
    /// Add the advice (ranked actions with savings) to the report.
    #[arg(long, help_heading = "Output")]
    pub advise: bool,
    #[command(flatten)]
    pub advise_opts: AdviseOpts,
}

/// Reading from a Prometheus-compatible store (Prometheus, Thanos, Mimir, VictoriaMetrics).
#[derive(Debug, Args, Default, Clone)]
#[command(next_help_heading = "Prometheus")]
pub(crate) struct PromArgs {
    /// Base URL of the Prometheus HTTP API (instead of files), e.g. http://prometheus:9090.
    #[arg(
        long,
        env = "GPUWISE_PROMETHEUS",
        hide_env_values = true,
        value_name = "URL",
        conflicts_with = "inputs"
    )]
    pub prometheus: Option<String>,
    /// Window end, RFC 3339 or YYYY-MM-DD (UTC) [default: now]; the start is --start.
    #[arg(long, value_name = "TIME", requires = "prometheus")]
    pub end: Option<String>,
    /// Window length back from the end, instead of --start [default: 7d].
    #[arg(
        long,
        value_name = "DURATION",
        requires = "prometheus",
        conflicts_with = "start"
    )]
    pub last: Option<String>,
    /// Label matchers every metric must match, e.g. '{namespace=~"ml-.*"}'.
    #[arg(long, value_name = "SELECTOR", requires = "prometheus")]
    pub selector: Option<String>,
    /// Pull the raw samples and profile them locally: the same as --path raw.
    #[arg(long, requires = "prometheus", conflicts_with = "path")]
    pub raw: bool,
    /// How to read the store: `raw` pulls every sample (exactly the files' figures),
    /// `pushdown` has the store aggregate (devices whose samples are off the scrape grid are
    /// still pulled raw), `auto` takes whichever costs less [default: auto].
    #[arg(long, value_name = "auto|pushdown|raw", requires = "prometheus", value_parser = ["auto", "pushdown", "raw"])]
    pub path: Option<String>,
    /// Scrape interval of the data [default: found from the data].
    #[arg(long, value_name = "DURATION", requires = "prometheus")]
    pub scrape_interval: Option<String>,
    /// Environment variable holding a bearer token.
    #[arg(long, value_name = "VAR", requires = "prometheus")]
    pub bearer_token_env: Option<String>,
    /// File holding a bearer token.
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    pub bearer_token_file: Option<PathBuf>,
    /// Basic auth user; the password is read from $GPUWISE_PROMETHEUS_PASSWORD.
    #[arg(long, value_name = "USER", requires = "prometheus")]
    pub basic_auth_user: Option<String>,
    /// Extra header, NAME: VALUE (repeatable), e.g. 'X-Scope-OrgID: team-a'.
    #[arg(long = "header", value_name = "NAME: VALUE", requires = "prometheus")]
    pub headers: Vec<String>,
    /// PEM file of a CA to trust for https.
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    pub ca_file: Option<PathBuf>,
    /// Time limit of one request [default: 60s].
    #[arg(long, value_name = "DURATION", requires = "prometheus")]
    pub timeout: Option<String>,
    /// Most samples one pushdown query may load in the store; above it, devices are queried
    /// in 16 shards [default: 50000000, Prometheus' --query.max-samples].
    #[arg(long, value_name = "N", requires = "prometheus")]
    pub sample_budget: Option<u64>,
    /// Retries of a failed request (connection errors, 429, 5xx), with doubling backoff [default: 2].
    #[arg(long, value_name = "N", requires = "prometheus")]
    pub retries: Option<u32>,
}

/// How inputs are read.
#[derive(Debug, Args, Default, Clone)]
#[command(next_help_heading = "Reading inputs")]
pub(crate) struct ReadArgs {
    /// Force the input format instead of detecting it.
    #[arg(long, value_name = "nvidia-smi|dmon|dcgm|csv")]
    pub input_format: Option<String>,
    /// Host name of every device (default: from the data, else the file name stem).
    #[arg(long)]
    pub host: Option<String>,
    /// Time zone of local timestamps (nvidia-smi, dmon) and of hour-of-week patterns.
    #[arg(long, env = "GPUWISE_TZ", value_name = "IANA")]
    pub tz: Option<String>,
    /// Column names of a `--format=csv,noheader` nvidia-smi log, in query order.
    #[arg(long, value_name = "FIELD,…")]
    pub columns: Option<String>,
    /// Column map of a generic CSV: `timestamp=COL,device=COL,util=COL,…` (repeatable).
    #[arg(long, value_name = "KEY=COL")]
    pub map: Vec<String>,
    /// Start time of a dmon log without date and time columns, or of the --prometheus window.
    #[arg(long, value_name = "TIME")]
    pub start: Option<String>,
    /// Interval between rounds of such a dmon log.
    #[arg(long, value_name = "DURATION")]
    pub interval: Option<String>,
    /// Only samples from this time on: RFC 3339, `YYYY-MM-DD[ HH:MM:SS]` (in --tz), an epoch, or
    /// a duration back from now (7d).
    #[arg(long, value_name = "TIME", conflicts_with = "prometheus")]
    pub since: Option<String>,
    /// Only samples before this time (same forms as --since).
    #[arg(long, value_name = "TIME", conflicts_with = "prometheus")]
    pub until: Option<String>,
    /// Treat the first skipped line or value as an error; with `check`, also exit 1 when a
    /// rule could not be decided (a team's hours unpriced, no data this month).
    #[arg(long)]
    pub strict: bool,
}

/// Where the catalog comes from.
#[derive(Debug, Args, Default, Clone)]
#[command(next_help_heading = "Catalog and prices")]
pub(crate) struct CatalogSourceArgs {
    /// Instances file to use instead of the built-in one (from `gpuwise catalog import`).
    #[arg(long, env = "GPUWISE_INSTANCES", value_name = "FILE")]
    pub instances: Option<PathBuf>,
    /// Overlay (TOML): GPUs of your own, negotiated prices, private clusters. See docs/catalog.md.
    #[arg(long, env = "GPUWISE_OVERLAY", value_name = "FILE")]
    pub overlay: Option<PathBuf>,
    /// Warn about prices older than this [default: 180].
    #[arg(long, value_name = "DAYS")]
    pub stale_price_days: Option<u32>,
}

/// Thresholds, prices and grouping.
#[derive(Debug, Args, Default, Clone)]
pub(crate) struct AnalysisArgs {
    #[command(flatten)]
    pub catalog: CatalogSourceArgs,
    /// Price devices (without a --prices rule) in this cloud: aws, gcp, azure, lambda, vast, onprem.
    #[arg(long, env = "GPUWISE_CLOUD")]
    pub cloud: Option<String>,
    /// Price devices in this region of --cloud.
    #[arg(long, env = "GPUWISE_REGION")]
    pub region: Option<String>,
    /// Pricing model of catalog prices: on-demand, spot, 1y, 3y [default: on-demand].
    #[arg(long, env = "GPUWISE_PRICING")]
    pub pricing: Option<String>,
    /// Price file (TOML): $/GPU-hour by host, label or GPU model. See docs/prices.md.
    #[arg(long, env = "GPUWISE_PRICES", value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Team file (TOML): hosts, namespaces and pods to teams. See docs/teams.md.
    #[arg(
        long,
        env = "GPUWISE_TEAMS",
        value_name = "FILE",
        help_heading = "Grouping"
    )]
    pub teams: Option<PathBuf>,
    /// Group devices by host, model, namespace, team, or label:NAME.
    #[arg(long, value_name = "KEY", help_heading = "Grouping")]
    pub group_by: Option<String>,
    /// Utilization below this is idle [default: 5].
    #[arg(long, value_name = "PCT", help_heading = "Thresholds")]
    pub idle_threshold: Option<f32>,
    /// Shortest idle episode [default: 10m].
    #[arg(long, value_name = "DURATION", help_heading = "Thresholds")]
    pub min_idle: Option<String>,
    /// Memory in use that makes idle time "held" [default: 1024].
    #[arg(long, value_name = "MIB", help_heading = "Thresholds")]
    pub held_idle_mib: Option<f32>,
    /// A longer gap between samples is no data [default: 5m].
    #[arg(long, value_name = "DURATION", help_heading = "Thresholds")]
    pub max_gap: Option<String>,
    /// A device idle this share of its time is idle [default: 80].
    #[arg(long, value_name = "PCT", help_heading = "Thresholds")]
    pub idle_share: Option<f64>,
    /// Mean utilization below this is underutilized [default: 50].
    #[arg(long, value_name = "PCT", help_heading = "Thresholds")]
    pub underutilized_below: Option<f64>,
    /// Mean utilization above this is saturated [default: 85].
    #[arg(long, value_name = "PCT", help_heading = "Thresholds")]
    pub saturated_above: Option<f64>,
}

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Folder to write the fleet and the reports to.
    #[arg(long, default_value = "gpuwise-demo")]
    pub out: PathBuf,
    /// Seed of the generator.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Output format of the summary on stdout.
    #[arg(long, short = 'f', default_value = "table")]
    pub format: String,
}

#[derive(Debug, Args)]
pub(crate) struct GenerateArgs {
    /// Folder to write to (created).
    #[arg(long)]
    pub out: PathBuf,
    /// Number of GPUs.
    #[arg(long, default_value_t = 48)]
    pub gpus: usize,
    /// Days of data.
    #[arg(long, default_value_t = 7)]
    pub days: u32,
    /// Sampling interval.
    #[arg(long, default_value = "30s")]
    pub interval: String,
    /// nvidia-smi, dcgm, dmon, mixed (each host in its template's format), or openmetrics
    /// (one file of DCGM metrics for `promtool tsdb create-blocks-from openmetrics`).
    #[arg(long, default_value = "mixed")]
    pub format: String,
    /// Seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// First sample, RFC 3339 or YYYY-MM-DD (UTC) [default: 2026-01-05, a Monday].
    #[arg(long)]
    pub start: Option<String>,
    /// Compress files: none, gzip or zstd.
    #[arg(long, default_value = "none")]
    pub compress: String,
    /// Write even when the output is estimated above 2 GB (asked only on a terminal).
    #[arg(long)]
    pub yes: bool,
    /// Also write a FOCUS 1.2 bill for the fleet to FILE, with planted disagreements (one host
    /// unbilled, one billed 24 h past its telemetry, one billed resource without telemetry),
    /// and what was planted to FILE.truth.json: try `gpuwise reconcile` on it.
    #[arg(long, value_name = "FILE")]
    pub bill: Option<PathBuf>,
}

const CATALOG_EXAMPLES: &str = "Examples:
  gpuwise catalog gpus
  gpuwise catalog instances --gpu H100 --cloud gcp --pricing spot
  gpuwise catalog price A100-SXM4-80GB --format json
  gpuwise catalog import --skypilot catalogs/v8 --aws-vantage aws_gpu.csv --as-of 2026-05-20 --out instances.csv";

#[derive(Debug, Subcommand)]
#[command(after_help = CATALOG_EXAMPLES)]
pub(crate) enum CatalogCommand {
    /// GPU specifications: memory, bandwidth, dense TFLOPS, TDP, MIG profiles, sources.
    Gpus(CatalogQueryArgs),
    /// Instance types and their prices per instance-hour.
    Instances(InstancesArgs),
    /// The cheapest way to buy a GPU-hour of GPU, per cloud and pricing model.
    Price(PriceArgs),
    /// Build an instances file from SkyPilot-format catalogs and the AWS GPU table.
    Import(ImportArgs),
}

#[derive(Debug, Args)]
pub(crate) struct CatalogQueryArgs {
    #[command(flatten)]
    pub source: CatalogSourceArgs,
    /// Output format.
    #[arg(
        long,
        short = 'f',
        default_value = "table",
        value_name = "table|json|csv|markdown"
    )]
    pub format: String,
}

#[derive(Debug, Args)]
pub(crate) struct InstancesArgs {
    #[command(flatten)]
    pub query: CatalogQueryArgs,
    /// Only this GPU (any name the catalog knows, or a prefix such as H100).
    #[arg(long)]
    pub gpu: Option<String>,
    /// Only this cloud.
    #[arg(long)]
    pub cloud: Option<String>,
    /// Only this region.
    #[arg(long)]
    pub region: Option<String>,
    /// Only instances with a price of this kind: on-demand, spot, 1y, 3y (also sorts by it).
    #[arg(long)]
    pub pricing: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct PriceArgs {
    /// The GPU (any name the catalog knows).
    pub gpu: String,
    #[command(flatten)]
    pub query: CatalogQueryArgs,
    /// Only this pricing model.
    #[arg(long)]
    pub pricing: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// A SkyPilot-format catalog folder (`<cloud>/vms.csv` below it).
    #[arg(long, value_name = "DIR")]
    pub skypilot: Vec<PathBuf>,
    /// The AWS GPU instance table (CSV from instances.vantage.sh data).
    #[arg(long, value_name = "FILE")]
    pub aws_vantage: Option<PathBuf>,
    /// Date of the prices (YYYY-MM-DD), recorded on every row.
    #[arg(long, value_name = "DATE")]
    pub as_of: String,
    /// Date of the AWS table's prices, if different.
    #[arg(long, value_name = "DATE")]
    pub aws_as_of: Option<String>,
    /// Source text recorded for the SkyPilot rows.
    #[arg(long, default_value = "SkyPilot catalog")]
    pub skypilot_source: String,
    /// Source text recorded for the AWS rows.
    #[arg(long, default_value = "instances.vantage.sh")]
    pub aws_source: String,
    /// Write the instances file here (default: stdout).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: Option<PathBuf>,
}

pub(crate) fn parse() -> Cli {
    Cli::parse()
}

/// A price flag: a finite number of dollars above zero (`NaN`, `inf` and `-1` parse as
/// numbers and were taken).
fn usd(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("`{s}` is not a price in USD above zero")),
    }
}

/// A flag whose name says hours: a plain number is hours; a duration with its unit (`2d`,
/// `90m`) is read as one (it was "invalid float literal").
fn hours(s: &str) -> Result<f64, String> {
    if let Ok(h) = s.trim().parse::<f64>() {
        return Ok(h);
    }
    #[allow(clippy::cast_precision_loss)]
    gpuwise_core::duration::parse_ms(s)
        .map(|ms| ms as f64 / 3_600_000.0)
        .map_err(|e| format!("{e}; or a number of hours"))
}
