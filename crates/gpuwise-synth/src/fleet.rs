//! Fleet layout, scenarios, sample generation and planted truth.

use gpuwise_core::{EpochMs, Sample};
use serde::Serialize;

/// SplitMix64: a well-known 64-bit mixer, for deterministic UUIDs.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What a GPU does all week.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    /// Training at 65–80 % around the clock.
    HealthyTraining,
    /// Training pinned at 93–100 %.
    Saturated,
    /// Bursts at 88–99 % with one-interval stalls below 2 % about a third of the time.
    DataStarved,
    /// Work 08:00–19:00 on weekdays, idle (memory freed) nights and weekends.
    IdleNightsWeekends,
    /// A notebook: idle while holding memory, a few short bursts on weekday afternoons.
    NotebookHeld,
    /// A small model served from a big GPU: steady 12–30 %, little memory.
    SmallModelServing,
    /// Inference following a daily curve between about 35 % and 85 %.
    DiurnalInference,
    /// Nothing runs.
    Idle,
}

impl Scenario {
    /// The class a correct report gives this scenario.
    #[must_use]
    pub fn expected_class(self) -> &'static str {
        match self {
            Scenario::HealthyTraining | Scenario::DataStarved | Scenario::DiurnalInference => {
                "healthy"
            }
            Scenario::Saturated => "saturated",
            Scenario::IdleNightsWeekends | Scenario::SmallModelServing => "underutilized",
            Scenario::NotebookHeld => "held_idle",
            Scenario::Idle => "idle",
        }
    }

    /// The bottleneck a correct report finds, where the scenario plants one.
    #[must_use]
    pub fn expected_bottleneck(self) -> Option<&'static str> {
        match self {
            Scenario::DataStarved => Some("input_bound"),
            _ => None,
        }
    }
}

/// One GPU of the fleet.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceSpec {
    /// Host name.
    pub host: String,
    /// Index on the host.
    pub index: u32,
    /// UUID (deterministic).
    pub uuid: String,
    /// Product name as nvidia-smi prints it.
    pub model_name: &'static str,
    /// Memory installed, MiB (as nvidia-smi prints `memory.total`).
    pub memory_total_mib: u32,
    /// Power limit, W.
    pub power_limit_w: u32,
    /// Idle power, W.
    pub idle_power_w: u32,
    /// Kubernetes namespace.
    pub namespace: &'static str,
    /// Pod name.
    pub pod: String,
    /// What it does.
    pub scenario: Scenario,
    /// File format its host is written in (`nvidia-smi`, `dcgm`, `dmon`).
    pub format: &'static str,
}

struct HostTemplate {
    prefix: &'static str,
    model: (&'static str, u32, u32, u32),
    scenarios: &'static [Scenario],
    namespace: &'static str,
    format: &'static str,
}

use Scenario::{
    DataStarved as DS, DiurnalInference as DI, HealthyTraining as HT, Idle as ID,
    IdleNightsWeekends as NW, NotebookHeld as NB, Saturated as SA, SmallModelServing as SM,
};

// (name printed by nvidia-smi, memory.total MiB, power limit W, idle power W). Memory totals
// are what nvidia-smi prints on these GPUs (real captures where we have them: H100 81559 MiB).
const A100: (&str, u32, u32, u32) = ("NVIDIA A100-SXM4-80GB", 81_920, 400, 60);
const H100: (&str, u32, u32, u32) = ("NVIDIA H100 80GB HBM3", 81_559, 700, 70);
const L4: (&str, u32, u32, u32) = ("NVIDIA L4", 23_034, 72, 16);
const T4: (&str, u32, u32, u32) = ("Tesla T4", 15_360, 70, 10);
const A10G: (&str, u32, u32, u32) = ("NVIDIA A10G", 23_028, 300, 25);
const L40S: (&str, u32, u32, u32) = ("NVIDIA L40S", 46_068, 350, 35);

const HOSTS: &[HostTemplate] = &[
    HostTemplate {
        prefix: "train-a100",
        model: A100,
        scenarios: &[HT, HT, HT, HT, HT, HT, SA, SA],
        namespace: "research",
        format: "dcgm",
    },
    HostTemplate {
        prefix: "train-a100",
        model: A100,
        scenarios: &[DS, DS, DS, DS, NW, NW, NW, NW],
        namespace: "research",
        format: "dcgm",
    },
    HostTemplate {
        prefix: "train-h100",
        model: H100,
        scenarios: &[SA, SA, SA, SA, HT, HT, ID, ID],
        namespace: "research",
        format: "nvidia-smi",
    },
    HostTemplate {
        prefix: "serve-a100",
        model: A100,
        scenarios: &[SM, SM, DI, DI],
        namespace: "ml-serving",
        format: "dcgm",
    },
    HostTemplate {
        prefix: "serve-l4",
        model: L4,
        scenarios: &[DI, DI, DI, ID],
        namespace: "ml-serving",
        format: "nvidia-smi",
    },
    HostTemplate {
        prefix: "serve-l4",
        model: L4,
        scenarios: &[DI, DI, DI, ID],
        namespace: "ml-serving",
        format: "nvidia-smi",
    },
    HostTemplate {
        prefix: "nb-t4",
        model: T4,
        scenarios: &[NB, NB, NB, NB],
        namespace: "notebooks",
        format: "dcgm",
    },
    HostTemplate {
        prefix: "nb-a10g",
        model: A10G,
        scenarios: &[NB, NB, NW, NW],
        namespace: "notebooks",
        format: "nvidia-smi",
    },
    HostTemplate {
        prefix: "dev-l40s",
        model: L40S,
        scenarios: &[NW, NW, ID, ID],
        namespace: "platform",
        format: "nvidia-smi",
    },
    HostTemplate {
        prefix: "dev-t4",
        model: T4,
        scenarios: &[NW, NW, NB, ID],
        namespace: "platform",
        format: "dmon",
    },
];

/// Options of a fleet.
#[derive(Clone, Debug)]
pub struct FleetOptions {
    /// Number of GPUs (the host templates are cycled).
    pub gpus: usize,
    /// Days of data.
    pub days: u32,
    /// Sampling interval, ms.
    pub interval_ms: u64,
    /// Seed.
    pub seed: u64,
    /// First sample (UTC).
    pub start_ms: EpochMs,
    /// Write every host in this format instead of the template's (`nvidia-smi`, `dcgm`, `dmon`).
    pub format: Option<&'static str>,
}

/// A fleet.
#[derive(Clone, Debug)]
pub struct Fleet {
    /// Options.
    pub options: FleetOptions,
    /// GPUs.
    pub devices: Vec<DeviceSpec>,
}

/// The planted state of one interval.
#[derive(Clone, Copy, Debug, PartialEq)]
struct State {
    util: f32,
    mem_mib: f32,
    idle: bool,
}

impl Fleet {
    /// Lay out a fleet.
    #[must_use]
    pub fn new(options: FleetOptions) -> Self {
        let mut devices = Vec::with_capacity(options.gpus);
        let mut counts: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        let mut h = 0usize;
        while devices.len() < options.gpus {
            let t = &HOSTS[h % HOSTS.len()];
            h += 1;
            let n = counts.entry(t.prefix).or_default();
            *n += 1;
            let host = format!("{}-{}", t.prefix, n);
            for (i, scenario) in t.scenarios.iter().enumerate() {
                if devices.len() >= options.gpus {
                    break;
                }
                let k = devices.len() as u64;
                let x = splitmix(options.seed ^ splitmix(k));
                let y = splitmix(x);
                #[allow(clippy::cast_possible_truncation)]
                let index = i as u32;
                devices.push(DeviceSpec {
                    uuid: format!(
                        "GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                        (x >> 32) as u32,
                        (x >> 16) as u16,
                        x as u16,
                        (y >> 48) as u16,
                        y & 0xffff_ffff_ffff
                    ),
                    host: host.clone(),
                    index,
                    model_name: t.model.0,
                    memory_total_mib: t.model.1,
                    power_limit_w: t.model.2,
                    idle_power_w: t.model.3,
                    namespace: t.namespace,
                    pod: format!("{}-{}-{}", t.namespace, host, i),
                    scenario: *scenario,
                    format: options.format.unwrap_or(t.format),
                });
            }
        }
        Self { options, devices }
    }

    /// Number of samples per device.
    #[must_use]
    pub fn samples_per_device(&self) -> u64 {
        u64::from(self.options.days) * gpuwise_core::DAY_MS.unsigned_abs()
            / self.options.interval_ms.max(1)
            + 1
    }

    /// Timestamp of sample `k`.
    #[must_use]
    #[allow(clippy::cast_possible_wrap)]
    pub fn ts(&self, k: u64) -> EpochMs {
        self.options.start_ms + (k * self.options.interval_ms) as i64
    }

    fn rng(&self, device: usize) -> fastrand::Rng {
        fastrand::Rng::with_seed(
            self.options.seed ^ (device as u64).wrapping_mul(0xA076_1D64_78BD_642F),
        )
    }

    /// Planted state of device `d` at time `ts`.
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
    fn state(&self, d: &DeviceSpec, ts: EpochMs, rng: &mut fastrand::Rng) -> State {
        let total = d.memory_total_mib as f32;
        let secs = ts.div_euclid(1000);
        let day = (secs.div_euclid(86_400) + 3).rem_euclid(7); // 1970-01-01 was a Thursday: Monday = 0
        let hour = secs.rem_euclid(86_400) as f32 / 3600.0;
        let work_hours = day < 5 && (8.0..19.0).contains(&hour);
        let u = |rng: &mut fastrand::Rng, lo: f32, hi: f32| lo + rng.f32() * (hi - lo);
        let idle = |rng: &mut fastrand::Rng, mem: f32| State {
            util: (rng.u8(0..=2)) as f32,
            mem_mib: mem,
            idle: true,
        };
        match d.scenario {
            Scenario::HealthyTraining => State {
                util: u(rng, 65.0, 80.0).round(),
                mem_mib: (total * u(rng, 0.70, 0.78)).round(),
                idle: false,
            },
            Scenario::Saturated => State {
                util: u(rng, 93.0, 100.0).round(),
                mem_mib: (total * u(rng, 0.85, 0.93)).round(),
                idle: false,
            },
            Scenario::DataStarved => {
                if rng.f32() < 0.35 {
                    State {
                        util: u(rng, 0.0, 2.0).round(),
                        mem_mib: (total * 0.55).round(),
                        idle: true,
                    }
                } else {
                    State {
                        util: u(rng, 88.0, 99.0).round(),
                        mem_mib: (total * u(rng, 0.55, 0.6)).round(),
                        idle: false,
                    }
                }
            }
            Scenario::IdleNightsWeekends => {
                if work_hours {
                    State {
                        util: u(rng, 60.0, 90.0).round(),
                        mem_mib: (total * 0.5).round(),
                        idle: false,
                    }
                } else {
                    idle(rng, 0.0)
                }
            }
            Scenario::NotebookHeld => {
                // A burst of work during the first 20 minutes of 14:00 on weekdays.
                let burst = day < 5 && (14.0..14.0 + 20.0 / 60.0).contains(&hour);
                if burst {
                    State {
                        util: u(rng, 40.0, 90.0).round(),
                        mem_mib: (total * 0.45).round(),
                        idle: false,
                    }
                } else {
                    idle(rng, (total * 0.45).round())
                }
            }
            Scenario::SmallModelServing => State {
                util: u(rng, 12.0, 30.0).round(),
                mem_mib: 16_384.0 + u(rng, 0.0, 512.0).round(),
                idle: false,
            },
            Scenario::DiurnalInference => {
                let curve = 60.0 + 25.0 * ((hour - 9.0) / 24.0 * std::f32::consts::TAU).sin();
                State {
                    util: (curve + u(rng, -4.0, 4.0)).round().clamp(10.0, 100.0),
                    mem_mib: (total * 0.6).round(),
                    idle: false,
                }
            }
            Scenario::Idle => idle(rng, 0.0),
        }
    }

    /// The samples of device `d`, in time order, with DCGM profiling fields filled as the
    /// scenario implies.
    #[allow(clippy::cast_precision_loss)]
    pub fn samples(&self, d: usize) -> impl Iterator<Item = Sample> + '_ {
        let spec = &self.devices[d];
        let mut rng = self.rng(d);
        (0..self.samples_per_device()).map(move |k| {
            let ts = self.ts(k);
            let st = self.state(spec, ts, &mut rng);
            let active = st.util / 100.0;
            let power = spec.idle_power_w as f32
                + active * (spec.power_limit_w - spec.idle_power_w) as f32 * 0.9;
            let (sm, tensor, dram) = match spec.scenario {
                Scenario::SmallModelServing | Scenario::DiurnalInference => {
                    (active * 0.7, active * 0.2, active * 0.75)
                }
                _ => (active * 0.85, active * 0.55, active * 0.35),
            };
            Sample {
                util_pct: Some(st.util),
                sm_active_pct: Some((sm * 1000.0).round() / 10.0),
                tensor_active_pct: Some((tensor * 1000.0).round() / 10.0),
                dram_active_pct: Some((dram * 1000.0).round() / 10.0),
                mem_bw_util_pct: Some((dram * 100.0).round()),
                mem_used_mib: Some(st.mem_mib),
                mem_total_mib: Some(spec.memory_total_mib as f32),
                power_w: Some((power * 100.0).round() / 100.0),
                power_limit_w: Some(spec.power_limit_w as f32),
                ..Sample::at(ts)
            }
        })
    }

    /// The planted truth of every device: computed from the planted states with a plain
    /// run-length count (an interval is idle when its state is idle; idle runs of at least
    /// 10 minutes are idle episodes; held when memory ≥ 1 GiB).
    #[must_use]
    #[allow(clippy::cast_precision_loss)]
    pub fn truth(&self) -> Truth {
        const MIN_EPISODE_MS: u64 = 600_000;
        let mut devices = Vec::new();
        for (d, spec) in self.devices.iter().enumerate() {
            let mut rng = self.rng(d);
            let n = self.samples_per_device();
            let states: Vec<State> = (0..n)
                .map(|k| self.state(spec, self.ts(k), &mut rng))
                .collect();
            let dt = self.options.interval_ms;
            let (mut idle_ms, mut held_ms, mut run, mut run_held, mut util_sum) =
                (0u64, 0u64, 0u64, 0u64, 0f64);
            // Every state but the last stands for one interval.
            for st in &states[..states.len().saturating_sub(1)] {
                util_sum += f64::from(st.util) * dt as f64;
                if st.idle {
                    run += dt;
                    if st.mem_mib >= 1024.0 {
                        run_held += dt;
                    }
                } else {
                    if run >= MIN_EPISODE_MS {
                        idle_ms += run;
                        held_ms += run_held;
                    }
                    run = 0;
                    run_held = 0;
                }
            }
            if run >= MIN_EPISODE_MS {
                idle_ms += run;
                held_ms += run_held;
            }
            let covered_ms = dt * (n.saturating_sub(1));
            devices.push(TruthDevice {
                id: format!("{}/{}", spec.host, self.device_gpu_id(spec)),
                host: spec.host.clone(),
                model_name: spec.model_name,
                namespace: spec.namespace,
                scenario: spec.scenario,
                format: spec.format,
                expected_class: spec.scenario.expected_class(),
                expected_bottleneck: spec.scenario.expected_bottleneck(),
                gpu_hours: gpuwise_core::hours_of_ms(covered_ms as f64),
                idle_hours: gpuwise_core::hours_of_ms(idle_ms as f64),
                held_idle_hours: gpuwise_core::hours_of_ms(held_ms as f64),
                mean_utilization_pct: if covered_ms > 0 {
                    util_sum / covered_ms as f64
                } else {
                    0.0
                },
            });
        }
        Truth {
            schema: "gpuwise.truth/v1",
            seed: self.options.seed,
            start_ms: self.options.start_ms,
            days: self.options.days,
            interval_s: self.options.interval_ms as f64 / 1000.0,
            devices,
        }
    }

    /// The device id a reader gives this GPU: `gpu<index>` for dmon (no UUID), else the UUID.
    #[must_use]
    pub fn device_gpu_id(&self, spec: &DeviceSpec) -> String {
        if spec.format == "dmon" {
            format!("gpu{}", spec.index)
        } else {
            spec.uuid.clone()
        }
    }

    /// Distinct hosts, in order, with the indices of their devices.
    #[must_use]
    pub fn hosts(&self) -> Vec<(String, &'static str, Vec<usize>)> {
        let mut out: Vec<(String, &'static str, Vec<usize>)> = Vec::new();
        for (i, d) in self.devices.iter().enumerate() {
            match out.last_mut() {
                Some((h, _, v)) if *h == d.host => v.push(i),
                _ => out.push((d.host.clone(), d.format, vec![i])),
            }
        }
        out
    }
}

/// What a correct report must find.
#[derive(Clone, Debug, Serialize)]
pub struct Truth {
    /// Schema id.
    pub schema: &'static str,
    /// Seed.
    pub seed: u64,
    /// First sample.
    pub start_ms: EpochMs,
    /// Days.
    pub days: u32,
    /// Sampling interval.
    pub interval_s: f64,
    /// Per device.
    pub devices: Vec<TruthDevice>,
}

/// Planted truth of one device.
#[derive(Clone, Debug, Serialize)]
pub struct TruthDevice {
    /// Report id (`host/uuid`, `host/gpuN` for dmon).
    pub id: String,
    /// Host.
    pub host: String,
    /// Printed model name.
    pub model_name: &'static str,
    /// Namespace.
    pub namespace: &'static str,
    /// Scenario.
    pub scenario: Scenario,
    /// Format written.
    pub format: &'static str,
    /// Class a correct report gives.
    pub expected_class: &'static str,
    /// Bottleneck a correct report finds, if planted.
    pub expected_bottleneck: Option<&'static str>,
    /// Hours of data.
    pub gpu_hours: f64,
    /// Hours in idle episodes.
    pub idle_hours: f64,
    /// Hours in idle episodes with memory held.
    pub held_idle_hours: f64,
    /// Time-weighted mean utilization.
    pub mean_utilization_pct: f64,
}
