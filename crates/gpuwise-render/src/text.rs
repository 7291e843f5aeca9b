//! Number and label formatting shared by the text renderers.

pub use gpuwise_core::price::usd;

/// A value that may be unknown, formatted by `f`, else `–`.
pub fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "–".to_owned(), f)
}

/// A cost that may be unknown: `unpriced`, never `$0.00`.
pub fn usd_or_unpriced(v: Option<f64>) -> String {
    v.map_or_else(|| "unpriced".to_owned(), usd)
}

/// A group's cost: of its priced devices, with how many are unpriced; unknown (`None`, every
/// hour of its kind unpriced) is `unpriced`, never `$0.00`.
pub fn group_usd(v: Option<f64>, unpriced: usize, devices: usize) -> String {
    match (v, unpriced) {
        (None, _) => "unpriced".to_owned(),
        (Some(v), 0) => usd(v),
        (Some(_), n) if n >= devices => "unpriced".to_owned(),
        (Some(v), n) => format!("{} + {n} unpriced", usd(v)),
    }
}

pub fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |x| format!("{x:.1}%"))
}

pub fn hours(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

pub fn gib(mib: Option<f64>) -> String {
    mib.map_or_else(|| "–".to_owned(), |m| format!("{:.1}", m / 1024.0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn dollars() {
        assert_eq!(super::usd(1234567.891), "$1,234,568");
        assert_eq!(super::usd(12.345), "$12.35");
        assert_eq!(super::usd(0.0), "$0.00");
        assert_eq!(super::usd(-1500.0), "-$1,500");
    }
}
