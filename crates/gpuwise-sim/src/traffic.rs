//! Inference traffic: requests with an arrival time and input/output token counts.
//!
//! Formats, told apart by their header:
//! - Azure LLM inference 2023: `TIMESTAMP,ContextTokens,GeneratedTokens` (wall clock
//!   `YYYY-MM-DD HH:MM:SS.fffffff`, no zone; arrivals are seconds after the first request);
//! - Mooncake (FAST'25): `timestamp_ms,input_length,output_length[,…]`;
//! - generic: `arrival_s,input_tokens,output_tokens`;
//! - ServeGen rate windows: per client `window_start_s,rate,cv,distribution,param1,param2` (no
//!   header), or a model's total `window_start_s,rate_rps_total,clients_active` (with its
//!   header; arrivals Poisson), turned into arrivals by [`from_rates`] with token counts drawn
//!   from a trace.
//!
//! A row with a missing or negative token count, no input tokens, or an unreadable time, is
//! skipped and counted; arrivals out of order are sorted and the count of rows that were out of
//! place is reported. Arrivals spanning more than [`MAX_SPAN_S`] are an error.

use std::collections::BTreeMap;

/// One request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    /// Seconds from the start of the trace.
    pub arrival_s: f64,
    /// Prompt tokens.
    pub input: u32,
    /// Generated tokens.
    pub output: u32,
}

/// A trace read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Traffic {
    /// The requests, by arrival.
    pub requests: Vec<Request>,
    /// The format read (`azure`, `mooncake`, `generic`, `servegen`).
    pub format: &'static str,
    /// Rows skipped, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Rows that arrived before the row above them (sorted into place).
    pub out_of_order: u64,
}

/// A trace that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {message}")]
pub struct TrafficError {
    origin: String,
    message: String,
}

fn bad(origin: &str, message: impl Into<String>) -> TrafficError {
    TrafficError {
        origin: origin.to_owned(),
        message: message.into(),
    }
}

#[derive(Clone, Copy)]
enum Layout {
    Azure,
    Mooncake,
    Generic,
}

/// Seconds since the epoch of an Azure wall-clock time `YYYY-MM-DD HH:MM:SS[.f…]`.
fn azure_time(s: &str) -> Option<f64> {
    let t: jiff::civil::DateTime = s.trim().replace(' ', "T").parse().ok()?;
    let ts = jiff::tz::TimeZone::UTC.to_timestamp(t).ok()?;
    #[allow(clippy::cast_precision_loss)]
    Some(ts.as_nanosecond() as f64 / 1e9)
}

fn tokens(s: Option<&str>) -> Result<u32, &'static str> {
    let s = s
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or("missing_tokens")?;
    match s.parse::<i64>() {
        Ok(v) if v < 0 => Err("negative_tokens"),
        Ok(v) => u32::try_from(v).map_err(|_| "bad_tokens"),
        Err(_) => Err("bad_tokens"),
    }
}

/// Read a request trace (see the module docs for the formats).
pub fn parse(text: &str, origin: &str) -> Result<Traffic, TrafficError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines
        .next()
        .ok_or_else(|| bad(origin, "empty: no header"))?;
    let cols: Vec<String> = header
        .trim_start_matches('\u{feff}')
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    let starts = |names: &[&str]| cols.len() >= 3 && cols[..3] == *names;
    let (layout, format) = if starts(&["timestamp", "contexttokens", "generatedtokens"]) {
        (Layout::Azure, "azure")
    } else if starts(&["timestamp_ms", "input_length", "output_length"]) {
        (Layout::Mooncake, "mooncake")
    } else if starts(&["arrival_s", "input_tokens", "output_tokens"]) {
        (Layout::Generic, "generic")
    } else {
        return Err(bad(
            origin,
            format!(
                "header `{}` is none of TIMESTAMP,ContextTokens,GeneratedTokens (Azure), timestamp_ms,input_length,output_length (Mooncake), arrival_s,input_tokens,output_tokens",
                header.chars().take(80).collect::<String>()
            ),
        ));
    };
    let mut out = Traffic {
        format,
        ..Traffic::default()
    };
    let mut raw = Vec::new();
    for (_, line) in lines {
        let mut f = line.split(',');
        let t = f.next().map(str::trim).unwrap_or("");
        let at = match layout {
            Layout::Azure => azure_time(t),
            Layout::Mooncake => t.parse::<f64>().ok().map(|ms| ms / 1000.0),
            Layout::Generic => t.parse::<f64>().ok(),
        };
        let Some(at) = at.filter(|v| v.is_finite()) else {
            *out.skipped.entry("bad_time".into()).or_default() += 1;
            continue;
        };
        match (tokens(f.next()), tokens(f.next())) {
            // A request without a prompt cannot be prefilled (vLLM refuses one); taken in, it
            // held its batch slot forever with an infinite time to first token.
            (Ok(0), Ok(_)) => *out.skipped.entry("no_input_tokens".into()).or_default() += 1,
            (Ok(input), Ok(output)) => raw.push(Request {
                arrival_s: at,
                input,
                output,
            }),
            (Err(why), _) | (_, Err(why)) => *out.skipped.entry(why.into()).or_default() += 1,
        }
    }
    finish(&mut out, raw, origin)?;
    Ok(out)
}

/// The longest span of arrivals simulated (366 days): the engine steps through it.
pub const MAX_SPAN_S: f64 = 366.0 * 86_400.0;

/// Sort, count what was out of place, and start the clock at the first arrival.
fn finish(out: &mut Traffic, mut raw: Vec<Request>, origin: &str) -> Result<(), TrafficError> {
    if raw.is_empty() {
        return Err(bad(
            origin,
            "no request with an arrival time and token counts",
        ));
    }
    out.out_of_order = raw
        .windows(2)
        .filter(|w| w[1].arrival_s < w[0].arrival_s)
        .count() as u64;
    raw.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s));
    let t0 = raw[0].arrival_s;
    let span = raw[raw.len() - 1].arrival_s - t0;
    if span > MAX_SPAN_S {
        return Err(bad(
            origin,
            format!(
                "arrivals span {span:.0} s; at most {MAX_SPAN_S:.0} s (366 days) are simulated: is the time column in the unit the format says?"
            ),
        ));
    }
    for r in &mut raw {
        r.arrival_s -= t0;
    }
    out.requests = raw;
    Ok(())
}

/// A Gamma(shape, 1) draw (Marsaglia and Tsang; shape < 1 by the boost `U^(1/shape)`). Written
/// here because it is a dozen lines and the pure crates take no distribution crate.
fn gamma(rng: &mut fastrand::Rng, shape: f64) -> f64 {
    if shape < 1.0 {
        let u = rng.f64().max(f64::MIN_POSITIVE);
        return gamma(rng, shape + 1.0) * u.powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = normal(rng);
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u = rng.f64();
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut fastrand::Rng) -> f64 {
    let u1 = rng.f64().max(f64::MIN_POSITIVE);
    let u2 = rng.f64();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// The most requests a rate series may make (a 14-day series of a whole service at hundreds of
/// requests a second is hundreds of millions: scale it).
pub const MAX_REQUESTS: f64 = 20e6;

/// Arrivals from ServeGen rate windows, each rate × `scale`: in each window, gaps between
/// requests are Gamma with the window's mean rate and coefficient of variation (`cv` 1, and
/// the totals' files, which have none, are Poisson), seeded; each request's token counts are
/// a pair drawn from `lengths` (a real trace), so the sizes keep their joint distribution. The
/// fitted family in a per-client file (Gamma or Weibull) is not used beyond its rate and cv.
pub fn from_rates(
    text: &str,
    origin: &str,
    lengths: &[Request],
    seed: u64,
    scale: f64,
) -> Result<Traffic, TrafficError> {
    if !(scale > 0.0 && scale.is_finite()) {
        return Err(bad(
            origin,
            format!("the rate scale must be above zero, got {scale}"),
        ));
    }
    if lengths.is_empty() {
        return Err(bad(
            origin,
            "token counts to draw from are needed (--lengths-from)",
        ));
    }
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut windows: Vec<(f64, f64, f64)> = Vec::new();
    let mut out = Traffic {
        format: "servegen",
        ..Traffic::default()
    };
    let mut lines = text.lines().filter(|l| !l.trim().is_empty()).peekable();
    // A header (the totals' files have one) says whether the third column is a cv.
    let mut has_cv = true;
    if let Some(first) = lines.peek()
        && first
            .split(',')
            .next()
            .is_some_and(|c| c.trim().parse::<f64>().is_err())
    {
        has_cv = first
            .to_ascii_lowercase()
            .split(',')
            .any(|c| c.trim() == "cv");
        lines.next();
    }
    for line in lines {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok());
        match (num(0), num(1)) {
            (Some(start), Some(rate)) if rate >= 0.0 && start.is_finite() => {
                let cv = if has_cv { num(2) } else { None };
                windows.push((start, rate * scale, cv.filter(|c| *c > 0.0).unwrap_or(1.0)));
            }
            _ => *out.skipped.entry("bad_window".into()).or_default() += 1,
        }
    }
    if windows.is_empty() {
        return Err(bad(origin, "no `window_start_s,rate,cv,…` rows"));
    }
    windows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let expected: f64 = windows
        .iter()
        .enumerate()
        .map(|(i, w)| w.1 * (windows.get(i + 1).map_or(600.0, |n| n.0 - w.0)))
        .sum();
    if expected > MAX_REQUESTS {
        return Err(bad(
            origin,
            format!(
                "these rates make about {expected:.3e} requests, more than {MAX_REQUESTS:.0e}: scale them (--rate-scale {:.2e})",
                MAX_REQUESTS / expected / 2.0
            ),
        ));
    }
    let mut raw = Vec::new();
    for (i, &(start, rate, cv)) in windows.iter().enumerate() {
        let end = windows.get(i + 1).map_or(start + 600.0, |w| w.0);
        if rate <= 0.0 {
            continue;
        }
        let shape = 1.0 / (cv * cv);
        let mut t = start;
        loop {
            t += gamma(&mut rng, shape) / (shape * rate);
            if t >= end {
                break;
            }
            let pick = lengths[rng.usize(..lengths.len())];
            raw.push(Request {
                arrival_s: t,
                ..pick
            });
        }
    }
    finish(&mut out, raw, origin)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_skips_and_order() {
        let t = parse(
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6800000,374,44\n2023-11-16 18:15:50.1800000,396,109\n2023-11-16 18:15:47.0000000,-3,10\n2023-11-16 18:15:48.0000000,,10\nyesterday,1,1\n",
            "azure.csv",
        )
        .expect("azure");
        assert_eq!(t.format, "azure");
        assert_eq!(t.requests.len(), 2);
        assert!((t.requests[1].arrival_s - 3.5).abs() < 1e-9);
        assert_eq!(t.skipped["negative_tokens"], 1);
        assert_eq!(t.skipped["missing_tokens"], 1);
        assert_eq!(t.skipped["bad_time"], 1);
        let m = parse(
            "timestamp_ms,input_length,output_length,num_prefix_blocks\n2000,10,5,1\n1000,20,6,1\n",
            "m.csv",
        )
        .expect("mooncake");
        assert_eq!(m.out_of_order, 1);
        assert_eq!(m.requests[0].input, 20);
        assert!((m.requests[1].arrival_s - 1.0).abs() < 1e-12);
        assert!(parse("a,b,c\n1,2,3\n", "x.csv").is_err());
        assert!(parse("arrival_s,input_tokens,output_tokens\n", "x.csv").is_err());
    }

    #[test]
    fn rate_windows_give_their_rate_and_burstiness() {
        let lengths = [Request {
            arrival_s: 0.0,
            input: 100,
            output: 10,
        }];
        // 10 windows of 600 s at 2 req/s, Poisson (cv 1), then bursty (cv 3).
        for cv in [1.0, 3.0] {
            let text: String = (0..10)
                .map(|i| format!("{},2.0,{cv},Gamma,1,1\n", i * 600))
                .collect();
            let t = from_rates(&text, "r.csv", &lengths, 7, 1.0).expect("rates");
            let n = t.requests.len() as f64;
            assert!((n / 6000.0 - 2.0).abs() < 0.1, "rate {}", n / 6000.0);
            let gaps: Vec<f64> = t
                .requests
                .windows(2)
                .map(|w| w[1].arrival_s - w[0].arrival_s)
                .collect();
            let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
            let got_cv = var.sqrt() / mean;
            assert!((got_cv - cv).abs() < 0.15 * cv, "cv {got_cv} for {cv}");
        }
        // A totals' file (header, no cv): Poisson, scaled; one too large is refused.
        let totals = "window_start_s,rate_rps_total,clients_active\n0,200,3\n600,0,0\n";
        let t = from_rates(totals, "t.csv", &lengths, 1, 0.01).expect("totals");
        assert!((t.requests.len() as f64 / 1200.0 - 2.0 / 2.0).abs() < 0.15);
        let huge = "window_start_s,rate_rps_total,clients_active\n0,1000000,3\n";
        assert!(from_rates(huge, "h.csv", &lengths, 1, 1.0).is_err());
    }

    /// A request without input tokens is skipped and counted (it held its batch slot forever);
    /// arrivals spanning more than a year are an error, not billions of engine steps.
    #[test]
    fn empty_prompts_and_endless_spans() {
        let t = parse(
            "arrival_s,input_tokens,output_tokens\n0,0,10\n1,5,10\n",
            "g.csv",
        )
        .expect("reads");
        assert_eq!(t.requests.len(), 1);
        assert_eq!(t.skipped["no_input_tokens"], 1);
        let err = parse(
            "arrival_s,input_tokens,output_tokens\n0,5,10\n1e300,5,10\n",
            "g.csv",
        )
        .expect_err("too long");
        assert!(
            err.to_string().contains("at most 31622400 s (366 days)"),
            "{err}"
        );
    }
}
