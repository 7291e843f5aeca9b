//! Inline SVG charts, written by hand: four simple chart shapes need only rectangles, lines
//! and text, and hand-written SVG keeps the HTML report small, dependency-free and readable
//! offline (no JavaScript, no fonts to fetch).

use std::fmt::Write as _;

pub fn esc(s: &str) -> String {
    crate::escape::html(s)
}

/// Colour for a utilization percentage: pale grey (idle) → deep blue (busy). No data is not a
/// colour: the heatmap hatches it.
pub fn util_color(p: f64) -> String {
    let t = (p / 100.0).clamp(0.0, 1.0);
    let lerp = |a: f64, b: f64| (a + (b - a) * t).round();
    format!(
        "rgb({},{},{})",
        lerp(241.0, 8.0),
        lerp(245.0, 69.0),
        lerp(249.0, 148.0)
    )
}

/// A line chart of utilization over time with the idle share as a shaded area.
/// `points`: (epoch ms, mean utilization %, idle share %).
pub fn timeline(points: &[(i64, Option<f64>, f64)], title: &str) -> String {
    let (w, h, l, r, t, b) = (900.0, 260.0, 48.0, 12.0, 28.0, 36.0);
    let mut s = format!(
        r#"<svg viewBox="0 0 {w} {h}" role="img" aria-label="{}" xmlns="http://www.w3.org/2000/svg">"#,
        esc(title)
    );
    let _ = write!(
        s,
        r##"<text x="{l}" y="18" class="t">{}</text>"##,
        esc(title)
    );
    if points.len() < 2 {
        s.push_str(r#"<text x="60" y="120">not enough data</text></svg>"#);
        return s;
    }
    let (x0, x1) = (points[0].0 as f64, points[points.len() - 1].0 as f64);
    let sx = |x: i64| l + (x as f64 - x0) / (x1 - x0).max(1.0) * (w - l - r);
    let sy = |y: f64| t + (1.0 - y / 100.0) * (h - t - b);
    timeline_axes(&mut s, points, (w, h, l, r, t, b), &sx, &sy);
    let area = idle_area(points, &sx, &sy);
    let _ = write!(
        s,
        r##"<path d="{area}" fill="#f4a261" fill-opacity="0.35"/>"##
    );
    let line = utilization_line(points, &sx, &sy);
    let _ = write!(
        s,
        r##"<path d="{line}" fill="none" stroke="#08457e" stroke-width="1.5"/>"##
    );
    let _ = write!(
        s,
        r##"<rect x="{}" y="8" width="10" height="10" fill="#08457e"/><text x="{}" y="17" class="a">mean utilization</text><rect x="{}" y="8" width="10" height="10" fill="#f4a261" fill-opacity="0.6"/><text x="{}" y="17" class="a">idle share of device-hours</text>"##,
        w - 330.0,
        w - 316.0,
        w - 200.0,
        w - 186.0
    );
    s.push_str("</svg>");
    s
}

/// Horizontal grid lines at every 25 %, and day ticks: the first day where the data starts,
/// then every midnight (at most about ten).
fn timeline_axes(
    s: &mut String,
    points: &[(i64, Option<f64>, f64)],
    (w, h, l, r, t, b): (f64, f64, f64, f64, f64, f64),
    sx: &dyn Fn(i64) -> f64,
    sy: &dyn Fn(f64) -> f64,
) {
    for y in [0.0, 25.0, 50.0, 75.0, 100.0] {
        let _ = write!(
            s,
            r##"<line x1="{l}" x2="{}" y1="{y1:.1}" y2="{y1:.1}" class="g"/><text x="{}" y="{:.1}" class="a" text-anchor="end">{y:.0}%</text>"##,
            w - r,
            l - 6.0,
            sy(y) + 4.0,
            y1 = sy(y)
        );
    }
    // Day ticks: the first day is labelled where the data starts, then every midnight.
    let day = gpuwise_core::DAY_MS;
    let first = jiff::Timestamp::from_millisecond(points[0].0)
        .map(|ts| ts.strftime("%a %m-%d").to_string())
        .unwrap_or_default();
    let _ = write!(
        s,
        r##"<text x="{l:.1}" y="{}" class="a" text-anchor="start">{first}</text>"##,
        h - b + 16.0
    );
    let mut d = (points[0].0 / day + 1) * day;
    let step = ((points[points.len() - 1].0 - points[0].0) / day / 10 + 1) * day;
    while d <= points[points.len() - 1].0 {
        let x = sx(d);
        let date = jiff::Timestamp::from_millisecond(d)
            .map(|ts| ts.strftime("%a %m-%d").to_string())
            .unwrap_or_default();
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{t}" y2="{}" class="g"/><text x="{x:.1}" y="{}" class="a" text-anchor="middle">{date}</text>"##,
            h - b,
            h - b + 16.0
        );
        d += step;
    }
}

/// The idle share as a step area (flat across each hour, so a one-hour change is a step, not
/// a spike between two neighbours).
fn idle_area(
    points: &[(i64, Option<f64>, f64)],
    sx: &dyn Fn(i64) -> f64,
    sy: &dyn Fn(f64) -> f64,
) -> String {
    let hour = gpuwise_core::HOUR_MS;
    let mut area = format!("M{:.1},{:.1}", sx(points[0].0), sy(0.0));
    for (i, p) in points.iter().enumerate() {
        let next = points
            .get(i + 1)
            .map_or(p.0 + hour, |q| q.0.min(p.0 + hour));
        let _ = write!(
            area,
            " L{:.1},{:.1} L{:.1},{:.1}",
            sx(p.0),
            sy(p.2),
            sx(next.min(points[points.len() - 1].0)),
            sy(p.2)
        );
    }
    let _ = write!(
        area,
        " L{:.1},{:.1} Z",
        sx(points[points.len() - 1].0),
        sy(0.0)
    );
    area
}

/// The mean utilization as a line, lifted where an hour has no reading.
fn utilization_line(
    points: &[(i64, Option<f64>, f64)],
    sx: &dyn Fn(i64) -> f64,
    sy: &dyn Fn(f64) -> f64,
) -> String {
    let mut line = String::new();
    let mut pen_up = true;
    for p in points {
        match p.1 {
            Some(u) => {
                let _ = write!(
                    line,
                    "{}{:.1},{:.1} ",
                    if pen_up { "M" } else { "L" },
                    sx(p.0),
                    sy(u)
                );
                pen_up = false;
            }
            None => pen_up = true,
        }
    }
    line
}

/// 7 × 24 heatmap. `bins[day*24+hour]` = (mean utilization %, idle share %, device-hours).
pub fn heatmap(bins: &[(Option<f64>, Option<f64>, f64)], tz: &str) -> String {
    let (cell, l, t) = (30.0, 44.0, 40.0);
    let w = l + 24.0 * cell + 10.0;
    // Room below the grid for the colour scale.
    let h = t + 7.0 * cell + 44.0;
    let title = format!("Mean utilization by hour of week ({tz})");
    let mut s = format!(
        r#"<svg viewBox="0 0 {w} {h}" role="img" aria-label="{}" xmlns="http://www.w3.org/2000/svg">"#,
        esc(&title)
    );
    // No data is hatched, so it is never read as 0 % (a pale cell was both).
    let _ = write!(
        s,
        r##"<defs><pattern id="nodata" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff"/><line x1="0" y1="0" x2="0" y2="6" stroke="#9aa5b1" stroke-width="1.5"/></pattern></defs><text x="{l}" y="16" class="t">{}</text>"##,
        esc(&title)
    );
    for hour in (0..24).step_by(3) {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" class="a" text-anchor="middle">{hour:02}</text>"#,
            l + (f64::from(hour) + 0.5) * cell,
            t - 6.0
        );
    }
    for (d, name) in ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
        .iter()
        .enumerate()
    {
        #[allow(clippy::cast_precision_loss)]
        let y = t + d as f64 * cell;
        let _ = write!(
            s,
            r#"<text x="{}" y="{:.1}" class="a" text-anchor="end">{name}</text>"#,
            l - 6.0,
            y + cell / 2.0 + 4.0
        );
        for hour in 0..24 {
            let (u, idle, dh) = bins
                .get(d * 24 + hour)
                .copied()
                .unwrap_or((None, None, 0.0));
            #[allow(clippy::cast_precision_loss)]
            let x = l + hour as f64 * cell;
            let tip = format!(
                "{name} {hour:02}:00 — utilization {}, idle {}, {dh:.1} device-hours",
                u.map_or("–".into(), |v| format!("{v:.1}%")),
                idle.map_or("–".into(), |v| format!("{v:.0}%"))
            );
            let _ = write!(
                s,
                r##"<rect x="{x:.1}" y="{y:.1}" width="{}" height="{}" fill="{}" stroke="#fff" data-util="{}"><title>{}</title></rect>"##,
                cell - 1.0,
                cell - 1.0,
                u.map_or_else(|| "url(#nodata)".to_owned(), util_color),
                u.map_or_else(|| "none".to_owned(), |v| format!("{v:.1}")),
                esc(&tip)
            );
        }
    }
    // The colour scale: what the shades mean, no data included.
    let ly = t + 7.0 * cell + 14.0;
    let _ = write!(
        s,
        r##"<g class="legend"><rect x="{l}" y="{ly:.1}" width="14" height="14" fill="url(#nodata)" stroke="#9aa5b1" stroke-width="0.5"/><text x="{:.1}" y="{:.1}" class="a">no data</text>"##,
        l + 18.0,
        ly + 11.0
    );
    for k in 0..=10u8 {
        let pct = f64::from(k) * 10.0;
        let x = l + 90.0 + f64::from(k) * 28.0;
        let _ = write!(
            s,
            r##"<rect x="{x:.1}" y="{ly:.1}" width="28" height="14" fill="{}"/>"##,
            util_color(pct)
        );
        if k % 5 == 0 {
            let _ = write!(
                s,
                r##"<text x="{:.1}" y="{:.1}" class="a" text-anchor="middle">{pct:.0}%</text>"##,
                x + 14.0,
                ly + 27.0
            );
        }
    }
    let _ = write!(
        s,
        r##"<text x="{:.1}" y="{:.1}" class="a">mean utilization</text></g>"##,
        l + 90.0 + 11.0 * 28.0 + 6.0,
        ly + 11.0
    );
    s.push_str("</svg>");
    s
}

/// Horizontal stacked bars: per label, hours in the five utilization bands.
pub fn bands(rows: &[(String, [f64; 5])]) -> String {
    let colors = ["#d9d9d9", "#c6dbef", "#6baed6", "#2171b5", "#08306b"];
    let names = ["0–5%", "5–25%", "25–50%", "50–85%", "85–100%"];
    let (l, bar, gap, w) = (230.0, 14.0, 4.0, 900.0);
    #[allow(clippy::cast_precision_loss)]
    let h = 40.0 + rows.len() as f64 * (bar + gap) + 10.0;
    let mut s = format!(
        r#"<svg viewBox="0 0 {w} {h}" role="img" aria-label="Utilization distribution per device" xmlns="http://www.w3.org/2000/svg">"#
    );
    s.push_str(
        r#"<text x="0" y="16" class="t">Share of each device's time in utilization bands</text>"#,
    );
    for (i, (c, n)) in colors.iter().zip(names).enumerate() {
        #[allow(clippy::cast_precision_loss)]
        let x = l + i as f64 * 110.0;
        let _ = write!(
            s,
            r#"<rect x="{x}" y="24" width="10" height="10" fill="{c}"/><text x="{}" y="33" class="a">{n}</text>"#,
            x + 14.0
        );
    }
    for (i, (label, hours)) in rows.iter().enumerate() {
        #[allow(clippy::cast_precision_loss)]
        let y = 42.0 + i as f64 * (bar + gap);
        let total: f64 = hours.iter().sum();
        let _ = write!(
            s,
            r#"<text x="{}" y="{:.1}" class="a" text-anchor="end">{}</text>"#,
            l - 6.0,
            y + bar - 3.0,
            esc(label)
        );
        let mut x = l;
        for (k, hrs) in hours.iter().enumerate() {
            if total <= 0.0 || *hrs <= 0.0 {
                continue;
            }
            let width = hrs / total * (w - l - 10.0);
            let _ = write!(
                s,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{width:.1}" height="{bar}" fill="{}"><title>{} {}: {:.1} h ({:.0}%)</title></rect>"#,
                colors[k],
                esc(label),
                names[k],
                hrs,
                100.0 * hrs / total
            );
            x += width;
        }
    }
    s.push_str("</svg>");
    s
}

/// Horizontal bars of cost per group, the idle part in orange.
/// Bars of cost and idle cost per group; each row's value text is given (an unpriced group
/// reads `unpriced`, never `$0`).
pub fn cost_bars(rows: &[(String, f64, f64, String)], title: &str) -> String {
    let (l, bar, gap, w) = (200.0, 18.0, 6.0, 900.0);
    #[allow(clippy::cast_precision_loss)]
    let h = 40.0 + rows.len() as f64 * (bar + gap) + 10.0;
    let max = rows.iter().map(|r| r.1).fold(0.0f64, f64::max).max(1e-9);
    let mut s = format!(
        r#"<svg viewBox="0 0 {w} {h}" role="img" aria-label="{}" xmlns="http://www.w3.org/2000/svg">"#,
        esc(title)
    );
    let _ = write!(
        s,
        r##"<text x="0" y="16" class="t">{}</text><rect x="{l}" y="24" width="10" height="10" fill="#5b8db8"/><text x="{}" y="33" class="a">cost</text><rect x="{}" y="24" width="10" height="10" fill="#e76f51"/><text x="{}" y="33" class="a">of which idle</text>"##,
        esc(title),
        l + 14.0,
        l + 60.0,
        l + 74.0
    );
    for (i, (label, cost, idle, text)) in rows.iter().enumerate() {
        #[allow(clippy::cast_precision_loss)]
        let y = 42.0 + i as f64 * (bar + gap);
        // Room right of the longest bar for its label (`$19,498 (idle $4,816) + 2 unpriced`).
        let span = w - l - 260.0;
        let cw = cost / max * span;
        let iw = idle / max * span;
        let _ = write!(
            s,
            r##"<text x="{}" y="{:.1}" class="a" text-anchor="end">{}</text><rect x="{l}" y="{y:.1}" width="{cw:.1}" height="{bar}" fill="#5b8db8"/><rect x="{l}" y="{y:.1}" width="{iw:.1}" height="{bar}" fill="#e76f51"><title>idle {}</title></rect><text x="{:.1}" y="{:.1}" class="a">{}</text>"##,
            l - 6.0,
            y + bar - 4.0,
            esc(label),
            esc(&crate::text::usd(*idle)),
            l + cw + 6.0,
            y + bar - 4.0,
            esc(text)
        );
    }
    s.push_str("</svg>");
    s
}

/// A line chart of `points` (x, y), with a marked point (the optimum): the cost curves of the
/// simulations. `log_x` spaces x logarithmically (checkpoint intervals from minutes to hours).
/// How an axis labels its values.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// Dollars.
    Usd,
    /// Plain numbers.
    Number,
}

impl Axis {
    fn label(self, v: f64) -> String {
        match self {
            Self::Usd => crate::text::usd(v),
            Self::Number if v.abs() >= 10.0 || v.fract() == 0.0 => format!("{v:.0}"),
            Self::Number => format!("{v:.1}"),
        }
    }
}

/// A line chart of `points` (x ascending), with `mark` circled; axes labelled as `axes` says
/// (x, y).
pub fn curve(
    points: &[(f64, f64)],
    mark: Option<f64>,
    log_x: bool,
    (title, x_label, y_label): (&str, &str, &str),
    axes: (Axis, Axis),
) -> String {
    let (w, h, l, r, t, b) = (900.0, 280.0, 72.0, 16.0, 30.0, 44.0);
    let mut s = format!(
        r#"<svg viewBox="0 0 {w} {h}" role="img" aria-label="{}" xmlns="http://www.w3.org/2000/svg"><text x="{l}" y="18" class="t">{}</text>"#,
        esc(title),
        esc(title)
    );
    if points.len() < 2 {
        s.push_str(r#"<text x="60" y="120">not enough points</text></svg>"#);
        return s;
    }
    let fx = |x: f64| if log_x { x.max(1e-9).ln() } else { x };
    let (x0, x1) = points.iter().fold((f64::MAX, f64::MIN), |(a, b), p| {
        (a.min(fx(p.0)), b.max(fx(p.0)))
    });
    let (y0, y1) = points
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let (y0, y1) = (y0.min(0.0), if y1 > y0 { y1 } else { y0 + 1.0 });
    let sx = |x: f64| l + (fx(x) - x0) / (x1 - x0).max(1e-9) * (w - l - r);
    let sy = |y: f64| t + (1.0 - (y - y0) / (y1 - y0)) * (h - t - b);
    for i in 0..=4 {
        let y = y0 + (y1 - y0) * f64::from(i) / 4.0;
        let _ = write!(
            s,
            r#"<line x1="{l}" x2="{}" y1="{:.1}" y2="{:.1}" class="g"/><text x="{}" y="{:.1}" class="a" text-anchor="end">{}</text>"#,
            w - r,
            sy(y),
            sy(y),
            l - 6.0,
            sy(y) + 4.0,
            esc(&axes.1.label(y))
        );
    }
    let step = (points.len() / 8).max(1);
    for p in points.iter().step_by(step) {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" class="a" text-anchor="middle">{}</text>"#,
            sx(p.0),
            h - b + 16.0,
            esc(&axes.0.label(p.0))
        );
    }
    let _ = write!(
        s,
        r#"<text x="{:.1}" y="{}" class="a" text-anchor="middle">{}</text><text x="14" y="{:.1}" class="a" transform="rotate(-90 14 {:.1})" text-anchor="middle">{}</text>"#,
        (l + w - r) / 2.0,
        h - 6.0,
        esc(x_label),
        (t + h - b) / 2.0,
        (t + h - b) / 2.0,
        esc(y_label)
    );
    let path: Vec<String> = points
        .iter()
        .map(|p| format!("{:.1},{:.1}", sx(p.0), sy(p.1)))
        .collect();
    let _ = write!(
        s,
        r##"<polyline points="{}" fill="none" stroke="#08457e" stroke-width="2"/>"##,
        path.join(" ")
    );
    if let Some(m) = mark.and_then(|m| points.iter().find(|p| (p.0 - m).abs() < 1e-9)) {
        let _ = write!(
            s,
            r##"<circle cx="{:.1}" cy="{:.1}" r="5" fill="#f4a261" stroke="#1d2733"/>"##,
            sx(m.0),
            sy(m.1)
        );
    }
    s.push_str("</svg>");
    s
}
