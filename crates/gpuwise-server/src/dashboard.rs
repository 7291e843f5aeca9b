//! The live dashboard `gpuwise serve` shows: the report's KPIs for a window (each number in an
//! element with `data-kpi="<fleet field>"` and its exact value in `data-value`, so a test or a
//! scraper reads the page as the API), the time-range picker, the fleet's timeline and
//! hour-of-week heatmap, cost by team, budget burn, the advice, and a device table that sorts
//! and filters; and one page per device. The page's only script (below, written for it) sorts
//! and filters the table and reloads the page when the data changes; nothing is fetched from
//! elsewhere.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use gpuwise_analysis::Advice;
use gpuwise_core::profile::DeviceProfile;
use gpuwise_core::report::{DeviceRow, Report};

use gpuwise_render::svg::{self, esc};
use gpuwise_render::text::{hours, pct, usd};

/// A team's budget and what it has spent this month: the ledger's own figures.
use gpuwise_analysis::Burn;

/// What the page shows besides the report.
#[derive(Clone, Debug, Default)]
pub struct View<'a> {
    /// The window's query (`last=7d`, `start=…&end=…`, or empty), kept in every link.
    pub query: &'a str,
    /// The window in words (`2026-01-05 → 2026-01-12, whole UTC days`).
    pub window: &'a str,
    /// The picker's choices: label and query.
    pub choices: &'a [(String, String)],
    /// The data's state in words (inputs, last refresh).
    pub status: &'a str,
    /// The generation of the data the page shows (the page reloads when `/healthz` has another).
    pub generation: u64,
    /// Seconds between checks for new data.
    pub refresh_s: u64,
    /// A problem reading the data (shown, not hidden).
    pub problem: Option<&'a str>,
    /// Budget burn per team (with a policy that has budgets).
    pub budgets: &'a [Burn],
    /// Whether the viewer is signed in with a session (a "log out" button is shown).
    pub logout: bool,
}

const CSS: &str = "body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:16px auto;max-width:1200px;color:#1d2733;padding:0 16px}\
h1{font-size:21px;margin:0 0 4px}h2{font-size:16px;margin:26px 0 8px;border-bottom:1px solid #dde3ea;padding-bottom:4px}\
.sub{color:#5a6877}.notice{background:#fff4e5;border:1px solid #f0c36d;border-radius:6px;padding:6px 10px}\
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:10px;margin:14px 0}.card{border:1px solid #dde3ea;border-radius:8px;padding:10px 12px}\
.card b{display:block;font-size:20px}.card span{color:#5a6877;font-size:12px}\
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border-bottom:1px solid #eef1f4;padding:4px 6px;text-align:left;white-space:nowrap}\
th{background:#f6f8fa;cursor:pointer;user-select:none}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}.scroll{overflow-x:auto;max-width:100%}\
svg{width:100%;height:auto;margin:6px 0}svg .t{font-size:14px;font-weight:600;fill:#1d2733}svg .a{font-size:11px;fill:#5a6877}svg .g{stroke:#e5e9ee}\
form.pick{display:flex;flex-wrap:wrap;gap:6px;align-items:center;margin:10px 0}form.pick select,form.pick input,form.pick button{font:inherit;padding:3px 6px}\
input#filter{font:inherit;padding:4px 8px;margin:6px 0;width:min(320px,100%)}.note{color:#5a6877;font-size:12px}\
.headline{font-size:18px;font-weight:600;margin:12px 0}td.wrap{white-space:normal;min-width:16em}\
.bar{background:#eef1f4;border-radius:4px;height:10px;min-width:80px}.bar i{display:block;height:10px;border-radius:4px;background:#4c8bd6}.bar i.over{background:#d65c4c}\
@media (max-width:600px){body{padding:0 8px}.card b{font-size:17px}.opt{display:none}\
.chart svg{min-width:620px}svg .a{font-size:15px}svg .t{font-size:17px}}";

/// Sorts the device table by a clicked header (numbers by `data-v`), filters its rows by the
/// text typed, and reloads the page when `/healthz` reports a newer generation of the data.
/// The pages' one script (static, so the server's content security policy allows it by its
/// SHA-256 and nothing inline else: no `'unsafe-inline'`, no `on…=` attributes).
pub const SCRIPT: &str = r"
(function(){
  document.body.setAttribute('data-script','ran');
  var w=document.getElementById('last');
  if(w){w.addEventListener('change',function(){w.form.submit();});}
  var t=document.getElementById('devices');
  if(t){
    var body=t.tBodies[0];
    Array.prototype.forEach.call(t.tHead.rows[0].cells,function(th,i){
      th.addEventListener('click',function(){
        var up=th.getAttribute('data-sort')!=='asc';
        Array.prototype.forEach.call(t.tHead.rows[0].cells,function(c){c.removeAttribute('data-sort');});
        th.setAttribute('data-sort',up?'asc':'desc');
        var rows=Array.prototype.slice.call(body.rows);
        rows.sort(function(a,b){
          var x=a.cells[i],y=b.cells[i];
          var p=x.getAttribute('data-v'),q=y.getAttribute('data-v');
          var r;
          if(p!==null&&q!==null){r=(p===''?-Infinity:+p)-(q===''?-Infinity:+q);}
          else{r=x.textContent.localeCompare(y.textContent);}
          return up?r:-r;
        });
        rows.forEach(function(r){body.appendChild(r);});
      });
    });
    var f=document.getElementById('filter');
    if(f){f.addEventListener('input',function(){
      var q=f.value.toLowerCase();
      Array.prototype.forEach.call(body.rows,function(r){
        r.style.display=r.textContent.toLowerCase().indexOf(q)>=0?'':'none';
      });
    });}
  }
  var g=document.body.getAttribute('data-generation'),s=+document.body.getAttribute('data-refresh');
  if(s>0&&window.fetch){setInterval(function(){
    fetch('healthz',{cache:'no-store'}).then(function(r){return r.json();}).then(function(h){
      if(String(h.generation)!==g){location.reload();}
    }).catch(function(){});
  },s*1000);}
})();
";

fn head(h: &mut String, title: &str, view: &View<'_>, base: &str) {
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><base href=\"{}\"><title>{}</title><style>{CSS}</style></head><body data-generation=\"{}\" data-refresh=\"{}\">",
        esc(base),
        esc(title),
        view.generation,
        view.refresh_s
    );
}

fn with_query(path: &str, query: &str, extra: &str) -> String {
    let mut q: Vec<&str> = Vec::new();
    if !extra.is_empty() {
        q.push(extra);
    }
    if !query.is_empty() {
        q.push(query);
    }
    if q.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{}", q.join("&"))
    }
}

/// A KPI card: the number shown, and its exact value for readers of the page.
fn kpi(h: &mut String, field: &str, label: &str, shown: &str, value: Option<f64>) {
    let v = value.map_or(String::new(), |v| v.to_string());
    let _ = write!(
        h,
        "<div class=\"card\"><b data-kpi=\"{field}\" data-value=\"{v}\">{}</b><span>{}</span></div>",
        esc(shown),
        esc(label)
    );
}

fn picker(h: &mut String, view: &View<'_>) {
    h.push_str("<form class=\"pick\" method=\"get\" action=\"./\"><label for=\"last\">Window</label><select id=\"last\" name=\"last\">");
    let current = view.query.strip_prefix("last=").unwrap_or("");
    for (label, q) in view.choices {
        let value = q.strip_prefix("last=").unwrap_or("");
        let _ = write!(
            h,
            "<option value=\"{}\"{}>{}</option>",
            esc(value),
            if value == current && (q.is_empty() == view.query.is_empty()) {
                " selected"
            } else {
                ""
            },
            esc(label)
        );
    }
    h.push_str("</select></form><form class=\"pick\" method=\"get\" action=\"./\"><label for=\"start\">From</label><input id=\"start\" name=\"start\" type=\"date\"><label for=\"end\">to</label><input id=\"end\" name=\"end\" type=\"date\"><button type=\"submit\">Show</button></form>");
}

/// The dashboard for one window.
#[must_use]
pub fn page(report: &Report, advice: Option<&Advice>, view: &View<'_>) -> String {
    let mut h = String::new();
    head(&mut h, "gpuwise — fleet", view, "./");
    let _ = write!(
        h,
        "<h1>GPU fleet</h1><div class=\"sub\" id=\"window\">{} · {} devices · {}</div>",
        esc(view.window),
        report.fleet.devices,
        esc(view.status)
    );
    // The answer first, in the static report's words.
    let _ = write!(
        h,
        "<p class=\"headline\" id=\"headline\">{}</p>",
        esc(&gpuwise_analysis::view::html::headline_text(report, advice))
    );
    if let Some(p) = view.problem {
        let _ = write!(h, "<p class=\"notice\" id=\"problem\">{}</p>", esc(p));
    }
    picker(&mut h, view);
    kpis(&mut h, report);
    charts(&mut h, report);
    teams(&mut h, report);
    budgets(&mut h, view.budgets);
    actions(&mut h, advice);
    devices(&mut h, report, view.query);
    let _ = writeln!(
        h,
        "<p class=\"note\">Every dollar figure is GPU-hours × the price named on the device's page. Data: <a href=\"{}\">report JSON</a> · <a href=\"{}\">advice JSON</a> · <a href=\"{}\">allocation JSON</a> · <a href=\"{}\">/metrics</a>.</p>{}<script>{SCRIPT}</script></body></html>",
        esc(&with_query("api/report", view.query, "")),
        esc(&with_query("api/advice", view.query, "")),
        esc(&with_query("api/allocation", view.query, "")),
        esc(&with_query("metrics", view.query, "")),
        if view.logout {
            "<form class=\"pick\" method=\"post\" action=\"logout\"><button type=\"submit\">Log out</button></form>"
        } else {
            ""
        }
    );
    h
}

/// The sign-in page of a server that needs a token: a form that posts it to `login` (no
/// script); `failed` says the last try was wrong.
#[must_use]
pub fn login_page(failed: bool) -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>gpuwise — sign in</title><style>{CSS}</style></head><body><h1>gpuwise</h1><p class=\"sub\">This dashboard needs the server's token (the value of the variable <code>--token-env</code> names).</p>{}<form method=\"post\" action=\"login\"><label for=\"token\">Token</label> <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"current-password\" required> <button type=\"submit\">Sign in</button></form></body></html>",
        if failed {
            "<p class=\"notice\" role=\"alert\">That is not the token.</p>"
        } else {
            ""
        }
    )
}

fn kpis(h: &mut String, r: &Report) {
    let f = &r.fleet;
    let k = &f.kpis;
    h.push_str("<div class=\"cards\" id=\"kpis\">");
    // Money first: what the fleet cost and what of it bought nothing.
    let cost = match f.cost_usd {
        None => "unpriced".to_owned(),
        Some(c) if f.unpriced_devices > 0 => {
            format!("{} + {} unpriced", usd(c), f.unpriced_devices)
        }
        Some(c) => usd(c),
    };
    kpi(h, "cost_usd", "cost", &cost, f.cost_usd);
    kpi(
        h,
        "idle_cost_usd",
        "idle cost",
        &f.idle_cost_usd.map_or("unpriced".into(), usd),
        f.idle_cost_usd,
    );
    kpi(
        h,
        "held_idle_cost_usd",
        "held-idle cost (memory allocated, no work)",
        &f.held_idle_cost_usd.map_or("unpriced".into(), usd),
        f.held_idle_cost_usd,
    );
    kpi(
        h,
        "cost_per_busy_gpu_hour_usd",
        "cost per busy GPU-hour",
        &k.cost_per_busy_gpu_hour_usd.map_or("unknown".into(), usd),
        k.cost_per_busy_gpu_hour_usd,
    );
    kpi(
        h,
        "mean_utilization_pct",
        "mean utilization",
        &pct(f.mean_utilization_pct),
        f.mean_utilization_pct,
    );
    kpi(
        h,
        "idle_gpu_hours",
        "idle GPU-hours",
        &hours(f.idle_gpu_hours),
        Some(f.idle_gpu_hours),
    );
    kpi(
        h,
        "gpu_hours",
        "GPU-hours",
        &hours(f.gpu_hours),
        Some(f.gpu_hours),
    );
    kpi(
        h,
        "spot_share_pct",
        "spot share of priced GPU-hours",
        &k.spot_share_pct
            .map_or("unknown (no pricing model)".into(), |v| pct(Some(v))),
        k.spot_share_pct,
    );
    h.push_str("</div><p class=\"note\">Spot interruptions are not in GPU telemetry: simulate them on real traces with <code>gpuwise simulate spot</code>.</p>");
}

fn charts(h: &mut String, r: &Report) {
    let points: Vec<(i64, Option<f64>, f64)> = r
        .timeline
        .iter()
        .map(|p| {
            let idle = if p.device_hours > 0.0 {
                100.0 * p.idle_hours / p.device_hours
            } else {
                0.0
            };
            (p.start_ms, p.mean_utilization_pct, idle)
        })
        .collect();
    h.push_str("<h2>Utilization over time</h2>");
    chart(
        h,
        &svg::timeline(&points, "Fleet mean utilization per hour (UTC)"),
    );
    let bins: Vec<(Option<f64>, Option<f64>, f64)> = r
        .hour_of_week
        .iter()
        .map(|b| (b.mean_utilization_pct, b.idle_share_pct, b.device_hours))
        .collect();
    h.push_str("<h2>Hour of week</h2>");
    chart(h, &svg::heatmap(&bins, &r.window.timezone));
}

/// A chart in a box that scrolls sideways on a phone, where the chart keeps a width its
/// labels can be read at (scaled to a 400-pixel screen they were 5 pixels high).
fn chart(h: &mut String, svg: &str) {
    h.push_str("<div class=\"scroll chart\">");
    h.push_str(svg);
    h.push_str("</div>");
}

/// Cost and idle cost per team, from the devices' owners (`(untagged)` for none).
fn teams(h: &mut String, r: &Report) {
    let mut by: BTreeMap<String, (f64, f64, usize)> = BTreeMap::new();
    for d in &r.devices {
        let e = by
            .entry(d.team.clone().unwrap_or_else(|| "(untagged)".into()))
            .or_default();
        match d.cost_usd {
            Some(c) => e.0 += c,
            None => e.2 += 1,
        }
        e.1 += d.idle_cost_usd.unwrap_or(0.0);
    }
    let rows: Vec<(String, f64, f64, String)> = by
        .into_iter()
        .map(|(team, (cost, idle, unpriced))| {
            let text = format!(
                "{} (idle {}){}",
                usd(cost),
                usd(idle),
                if unpriced > 0 {
                    format!(" + {unpriced} unpriced")
                } else {
                    String::new()
                }
            );
            (team, cost, idle, text)
        })
        .collect();
    h.push_str("<h2>Cost by team</h2><div id=\"teams\" class=\"scroll chart\">");
    h.push_str(&svg::cost_bars(&rows, "Cost and idle cost by team"));
    h.push_str("</div>");
}

fn budgets(h: &mut String, budgets: &[Burn]) {
    h.push_str("<h2>Budget burn</h2>");
    if budgets.is_empty() {
        h.push_str("<p class=\"note\" id=\"budgets\">No budgets: give <code>--policy</code> a file with <code>[budget] monthly_usd</code> (docs/policy.md).</p>");
        return;
    }
    h.push_str("<div class=\"scroll\"><table id=\"budgets\"><thead><tr><th>TEAM</th><th>MONTH</th><th class=\"n\">SPENT</th><th class=\"n\">BUDGET</th><th class=\"n\">FORECAST</th><th>BURN</th></tr></thead><tbody>");
    for b in budgets {
        let share = if b.limit_usd > 0.0 {
            100.0 * b.month_to_date_usd / b.limit_usd
        } else {
            0.0
        };
        let over = b.forecast_usd.unwrap_or(b.month_to_date_usd) > b.limit_usd;
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td><div class=\"bar\" title=\"{share:.0} %\"><i class=\"{}\" style=\"width:{:.1}%\"></i></div></td></tr>",
            esc(&b.team),
            esc(&b.month),
            usd(b.month_to_date_usd),
            usd(b.limit_usd),
            b.forecast_usd.map_or("–".into(), usd),
            if over { "over" } else { "" },
            share.clamp(0.0, 100.0)
        );
    }
    h.push_str("</tbody></table></div>");
}

fn actions(h: &mut String, advice: Option<&Advice>) {
    h.push_str("<h2>Advice</h2>");
    let Some(a) = advice.filter(|a| !a.actions.is_empty()) else {
        h.push_str("<p class=\"note\" id=\"advice\">No action found for this window.</p>");
        return;
    };
    let _ = write!(
        h,
        "<p id=\"advice-total\">The plan saves <b>{}/month</b> of {}/month.</p><div class=\"scroll\"><table id=\"advice\"><thead><tr><th>ACTION</th><th class=\"n\">SAVES/MONTH</th><th>DEVICES</th><th>CONFIDENCE</th><th>EVIDENCE</th></tr></thead><tbody>",
        usd(a.total_monthly_savings_usd),
        usd(a.current_monthly_usd)
    );
    for x in a.actions.iter().filter(|x| x.in_plan).take(25) {
        let names = match x.target_names.as_slice() {
            [] => String::new(),
            [one] => one.clone(),
            [first, rest @ ..] => format!("{first} +{} more", rest.len()),
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"n\">{}</td><td>{}</td><td title=\"{}\">{}</td><td class=\"wrap\">{}</td></tr>",
            esc(x.kind.as_str()),
            usd(x.plan_savings_usd),
            esc(&names),
            esc(&x.confidence.reason),
            gpuwise_analysis::view::advice::level(x.confidence.level),
            esc(x.evidence.first().map_or("", String::as_str))
        );
    }
    h.push_str("</tbody></table></div>");
}

/// A number cell of class `class`, its exact value in `data-v` for sorting.
fn num(class: &str, v: Option<f64>, shown: &str) -> String {
    format!(
        "<td class=\"{class}\" data-v=\"{}\">{}</td>",
        v.map_or(String::new(), |v| v.to_string()),
        esc(shown)
    )
}

fn devices(h: &mut String, r: &Report, query: &str) {
    let _ = write!(
        h,
        "<h2>Devices</h2><input id=\"filter\" type=\"search\" placeholder=\"Filter {} devices\" aria-label=\"Filter devices\"><div class=\"scroll\"><table id=\"devices\"><thead><tr><th>DEVICE</th><th class=\"n\">COST</th><th class=\"n\">IDLE $</th><th class=\"n\">UTIL</th><th class=\"n opt\">IDLE H</th><th class=\"n opt\">GPU-H</th><th class=\"opt\">CLASS</th><th class=\"opt\">MODEL</th><th class=\"opt\">TEAM</th></tr></thead><tbody>",
        r.devices.len()
    );
    for d in &r.devices {
        let link = with_query("device", query, &format!("id={}", url_escape(&d.id)));
        let _ = write!(
            h,
            "<tr data-id=\"{}\"><td><a href=\"{}\">{}</a></td>{}{}{}{}{}<td class=\"opt\">{}</td><td class=\"opt\">{}</td><td class=\"opt\">{}</td></tr>",
            esc(&d.id),
            esc(&link),
            esc(&d.name),
            num("n", d.cost_usd, &d.cost_usd.map_or("unpriced".into(), usd)),
            num(
                "n",
                d.idle_cost_usd,
                &d.idle_cost_usd.map_or("unpriced".into(), usd)
            ),
            num("n", d.mean_utilization_pct, &pct(d.mean_utilization_pct)),
            num("n opt", Some(d.idle_hours), &hours(d.idle_hours)),
            num("n opt", Some(d.gpu_hours), &hours(d.gpu_hours)),
            esc(d.class.as_str()),
            esc(&gpuwise_analysis::view::model(d)),
            esc(d.team.as_deref().unwrap_or("–")),
        );
    }
    h.push_str("</tbody></table></div>");
}

/// Percent-encode a query value (device ids hold `/` and `:`; labels may hold anything).
#[must_use]
pub fn url_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The page of one device: its figures, its hours and its hour-of-week pattern, its idle
/// windows and where its price comes from.
#[must_use]
pub fn device_page(device: &DeviceRow, profile: Option<&DeviceProfile>, view: &View<'_>) -> String {
    let mut h = String::new();
    head(&mut h, &format!("gpuwise — {}", device.name), view, "./");
    let _ = write!(
        h,
        "<p><a href=\"{}\">← fleet</a></p><h1>{}</h1><div class=\"sub\">{} · {} · team {} · {}</div>",
        esc(&with_query("./", view.query, "")),
        esc(&device.name),
        esc(&gpuwise_analysis::view::model(device)),
        esc(&device.host),
        esc(device.team.as_deref().unwrap_or("–")),
        esc(view.window)
    );
    h.push_str("<div class=\"cards\" id=\"kpis\">");
    kpi(
        &mut h,
        "mean_utilization_pct",
        "mean utilization",
        &pct(device.mean_utilization_pct),
        device.mean_utilization_pct,
    );
    kpi(
        &mut h,
        "gpu_hours",
        "GPU-hours",
        &hours(device.gpu_hours),
        Some(device.gpu_hours),
    );
    kpi(
        &mut h,
        "idle_hours",
        "idle hours",
        &hours(device.idle_hours),
        Some(device.idle_hours),
    );
    kpi(
        &mut h,
        "idle_cost_usd",
        "idle cost",
        &device.idle_cost_usd.map_or("unpriced".into(), usd),
        device.idle_cost_usd,
    );
    kpi(
        &mut h,
        "cost_usd",
        "cost",
        &device.cost_usd.map_or("unpriced".into(), usd),
        device.cost_usd,
    );
    h.push_str("</div>");
    let _ = write!(
        h,
        "<p><b>{}</b>: {}</p><p class=\"note\">Price: {} ({}).</p>",
        esc(device.class.as_str()),
        esc(&device.class_reason),
        device
            .usd_per_gpu_hour
            .map_or("none".into(), |p| format!("{}/GPU-hour", usd(p))),
        esc(device.price_source.as_deref().unwrap_or("no price found"))
    );
    if let Some(p) = profile {
        device_charts(&mut h, p);
    }
    if !device.idle_windows.is_empty() {
        h.push_str("<h2>Recurring idle windows</h2><ul>");
        for w in &device.idle_windows {
            let _ = write!(
                h,
                "<li>{}</li>",
                esc(&gpuwise_core::diagnose::window_words(w))
            );
        }
        h.push_str("</ul>");
    }
    let _ = writeln!(h, "<script>{SCRIPT}</script></body></html>");
    h
}

fn device_charts(h: &mut String, p: &DeviceProfile) {
    let s = &p.stats;
    let points: Vec<(i64, Option<f64>, f64)> = s
        .hourly
        .iter()
        .map(|c| {
            let mean = (c.util_hours > 0.0).then(|| {
                #[allow(clippy::cast_precision_loss)]
                let w = c.util_weighted as f64;
                w / 100.0 / (c.util_hours * gpuwise_core::HOUR_MS as f64)
            });
            let idle = if c.covered_hours > 0.0 {
                100.0 * c.idle_hours / c.covered_hours
            } else {
                0.0
            };
            (c.start_ms, mean, idle)
        })
        .collect();
    h.push_str("<h2>Utilization over time</h2>");
    chart(
        h,
        &svg::timeline(&points, "Mean utilization per hour (UTC)"),
    );
    let bins: Vec<(Option<f64>, Option<f64>, f64)> = s
        .hour_of_week()
        .iter()
        .map(|b| {
            (
                (b.util_hours > 0.0).then(|| b.util_pct_hours / b.util_hours),
                (b.covered_hours > 0.0).then(|| 100.0 * b.idle_hours / b.covered_hours),
                b.covered_hours,
            )
        })
        .collect();
    h.push_str("<h2>Hour of week</h2>");
    chart(h, &svg::heatmap(&bins, s.tz.iana_name().unwrap_or("UTC")));
}
