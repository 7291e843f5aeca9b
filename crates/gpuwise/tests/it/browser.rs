//! The HTML report as a person sees it: the demo's report loaded in headless Chromium (Debian
//! `chromium`, installed by `.ci/run`) at desktop and phone widths. Screenshots are kept under
//! `target/screenshots/`; the DOM is checked by a small script run in a copy of the page (the
//! report itself carries no script): the answer leads, and nothing is wider than the screen.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{repo, run};

fn chromium() -> Option<&'static str> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Some(name);
        }
    }
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "chromium must be installed in CI (.ci/run installs Debian's `chromium`)"
    );
    eprintln!("skipping: chromium is not installed (apt-get install chromium)");
    None
}

fn headless(browser: &str, width: u32, args: &[&str], page: &Path) -> String {
    headless_url(browser, width, args, &format!("file://{}", page.display()))
}

fn headless_url(browser: &str, width: u32, args: &[&str], url: &str) -> String {
    let o = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
            &format!("--window-size={width},1600"),
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("chromium runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// What the checking script finds, from the page's title after it ran.
fn check(browser: &str, width: u32, html: &str, dir: &Path) -> String {
    let script = r#"<script>
window.addEventListener('load', () => {
  const out = [];
  const h = document.getElementById('headline');
  out.push(h && h.textContent.trim().length > 20 ? 'headline' : 'NO-HEADLINE');
  // The headline comes before every section heading.
  const first = document.querySelector('h2');
  out.push(h && first && (h.compareDocumentPosition(first) & Node.DOCUMENT_POSITION_FOLLOWING) ? 'first' : 'NOT-FIRST');
  const vw = document.documentElement.clientWidth;
  out.push(document.documentElement.scrollWidth <= vw ? 'fits' : 'PAGE-WIDER:' + document.documentElement.scrollWidth);
  // Elements outside the sideways-scrolling table boxes may not stick out of the screen.
  let wide = 0;
  for (const e of document.body.querySelectorAll('*')) {
    if (e.closest('.scroll')) continue;
    const r = e.getBoundingClientRect();
    if (r.right > vw + 1) wide++;
  }
  out.push(wide === 0 ? 'none-wider' : 'WIDER:' + wide);
  out.push('details:' + document.querySelectorAll('details').length);
  out.push('right-th:' + document.querySelectorAll('th.n').length);
  document.title = out.join(' ');
});
</script>"#;
    let copy = dir.join(format!("check-{width}.html"));
    std::fs::write(&copy, html.replace("</body>", &format!("{script}</body>"))).expect("copy");
    let dom = headless(browser, width, &["--dump-dom"], &copy);
    let start = dom.find("<title>").expect("a title") + 7;
    let end = dom[start..].find("</title>").expect("title end") + start;
    dom[start..end].to_owned()
}

/// Screenshots of `page` at desktop and phone widths (`target/screenshots/NAME-WIDTH.png`),
/// and what the checking script finds at each: the answer first, nothing wider than the
/// screen — asserted here; the rest of what it found is returned per width.
fn screens(browser: &str, name: &str, page: &Path, html: &str, dir: &Path) -> Vec<(u32, String)> {
    let shots: PathBuf = repo().join("target/screenshots");
    std::fs::create_dir_all(&shots).expect("screenshots dir");
    let mut out = Vec::new();
    for width in [1400u32, 420] {
        let png = shots.join(format!("{name}-{width}.png"));
        let _ = std::fs::remove_file(&png);
        headless(
            browser,
            width,
            &[&format!("--screenshot={}", png.display())],
            page,
        );
        assert!(
            std::fs::metadata(&png).is_ok_and(|m| m.len() > 10_000),
            "screenshot {}",
            png.display()
        );
        let found = check(browser, width, html, dir);
        for want in ["headline", "first", "fits", "none-wider"] {
            assert!(
                found.split(' ').any(|w| w == want),
                "{name} at {width} px: {found}"
            );
        }
        out.push((width, found));
    }
    out
}

#[test]
fn the_html_report_leads_with_the_answer_at_every_width() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("demo");
    let o = run(&["demo", "--out", &out.display().to_string()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let report = out.join("report.html");
    let html = std::fs::read_to_string(&report).expect("report.html");
    assert!(
        !html.contains("<script"),
        "the report itself runs no script"
    );
    for (width, found) in screens(browser, "report", &report, &html, dir.path()) {
        // Each action's details are collapsed; number columns are right-aligned with their
        // headers.
        let details: usize = found
            .split(' ')
            .find_map(|w| w.strip_prefix("details:"))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(details >= 10, "at {width} px: {found}");
        assert!(!found.contains("right-th:0"), "at {width} px: {found}");
    }
}

/// The two simulation pages, written by the binary into `dir`: (name, file).
fn simulation_pages(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    // A trace that flaps every few hours, and a small generated fleet for the commitment.
    let trace = dir.join("t.json");
    let data: Vec<String> = (0..600)
        .map(|i| u32::from(i % 7 != 6 && i % 11 != 0).to_string())
        .collect();
    std::fs::write(
        &trace,
        format!(
            r#"{{"metadata":{{"gap_seconds":600}},"data":[{}]}}"#,
            data.join(",")
        ),
    )
    .expect("trace");
    let fleet = dir.join("fleet");
    let g = run(&[
        "generate",
        "--out",
        &fleet.display().to_string(),
        "--gpus",
        "12",
        "--days",
        "2",
        "--interval",
        "5m",
        "--format",
        "nvidia-smi",
    ]);
    assert_eq!(g.code, 0, "{}", g.stderr);
    std::fs::remove_file(fleet.join("truth.json")).expect("truth");
    let (trace, fleet) = (trace.display().to_string(), fleet.display().to_string());
    let pages = [
        (
            "spot",
            vec![
                "simulate",
                "spot",
                "--trace",
                &trace,
                "--work-hours",
                "24",
                "--deadline-hours",
                "36",
                "--spot-price",
                "1",
                "--on-demand-price",
                "3",
                "--checkpoint-interval",
                "auto",
                "--checkpoint-cost",
                "2m",
                "--starts",
                "40",
            ],
        ),
        (
            "commit",
            vec![
                "simulate",
                "commit",
                &fleet,
                "--on-demand-price",
                "4",
                "--commit-1y-price",
                "2.5",
                "--commit-3y-price",
                "1.6",
                "--no-progress",
            ],
        ),
    ];
    let mut written = Vec::new();
    for (name, args) in pages {
        let page = dir.join(format!("{name}.html"));
        let mut all = args.clone();
        let out = page.display().to_string();
        all.extend_from_slice(&["--format", "html", "-o", &out]);
        let o = run(&all);
        assert_eq!(o.code, 0, "{name}: {}", o.stderr);
        written.push((name, page));
    }
    written.push(serve_page(dir));
    written
}

/// A small serving sweep's page: the chosen configuration, its replicas over time, the front.
fn serve_page(dir: &Path) -> (&'static str, PathBuf) {
    let traffic = dir.join("traffic.csv");
    let rows: String = (0..400)
        .map(|i| format!("{},700,120\n", f64::from(i) * 0.4))
        .collect();
    std::fs::write(
        &traffic,
        format!("arrival_s,input_tokens,output_tokens\n{rows}"),
    )
    .expect("traffic");
    let page = dir.join("serve.html");
    let o = run(&[
        "simulate",
        "serve",
        "--trace",
        &traffic.display().to_string(),
        "--model",
        "llama-3-8b",
        "--gpu",
        "L4,H100-SXM5-80GB",
        "--replicas",
        "1,2,3",
        "--max-batch",
        "8,32",
        "--slo-ttft-ms",
        "2000",
        "--slo-tpot-ms",
        "120",
        "--sweep",
        "--format",
        "html",
        "-o",
        &page.display().to_string(),
    ]);
    assert_eq!(o.code, 0, "serve: {}", o.stderr);
    ("serve", page)
}

/// The simulations' HTML pages, read in the same browser at the same widths: the answer first,
/// the cost chart, nothing wider than the screen; screenshots beside the report's.
#[test]
fn the_simulation_pages_lead_with_the_answer_at_every_width() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, page) in simulation_pages(dir.path()) {
        let html = std::fs::read_to_string(&page).expect("page");
        assert!(
            html.contains("<svg") && !html.contains("<script"),
            "{name}: a chart, no script"
        );
        screens(
            browser,
            &format!("simulate-{name}"),
            &page,
            &html,
            dir.path(),
        );
    }
}

/// `data-kpi="NAME" data-value="V"` pairs in a page.
fn kpis(dom: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = dom;
    while let Some(i) = rest.find("data-kpi=\"") {
        rest = &rest[i + 10..];
        let name = &rest[..rest.find('"').expect("kpi end")];
        let v = rest.find("data-value=\"").expect("a data-value") + 12;
        let value = &rest[v..v + rest[v..].find('"').expect("value end")];
        out.push((name.to_owned(), value.to_owned()));
    }
    out
}

/// Every `data-kpi` of the page is the API's fleet figure of that name.
fn assert_kpis_are(dom: &str, api: &serde_json::Value) {
    let found = kpis(dom);
    assert_eq!(found.len(), 8, "{found:?}");
    let fleet = &api["fleet"];
    for (name, value) in &found {
        let want = fleet
            .get(name)
            .or_else(|| fleet["kpis"].get(name))
            .unwrap_or_else(|| panic!("{name} is a fleet field"));
        match want.as_f64() {
            Some(w) => {
                let v: f64 = value.parse().unwrap_or_else(|_| panic!("{name}={value}"));
                assert!(
                    (v - w).abs() <= 1e-9 * w.abs().max(1.0),
                    "{name}: page {v}, API {w}"
                );
            }
            None => assert!(
                want.is_null() && value.is_empty(),
                "{name}: {value} vs {want}"
            ),
        }
    }
}

#[test]
fn the_dashboard_shows_the_apis_figures_at_every_width() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let s = served_team_fleet(dir.path());
    let (code, body) = s.get("/api/report");
    assert_eq!(code, 200);
    let api: serde_json::Value = serde_json::from_str(&body).expect("report");
    // The live page, as the browser built it: every KPI is the API's number.
    let dom = headless_url(browser, 1400, &["--dump-dom"], &format!("{}/", s.base));
    assert_kpis_are(&dom, &api);
    // The page's script ran under the server's content security policy (allowed by its hash,
    // with no 'unsafe-inline'), and no element carries an inline handler.
    assert!(
        dom.contains("data-script=\"ran\""),
        "the script was blocked"
    );
    assert!(
        !dom.contains("onchange=") && !dom.contains("onclick="),
        "inline handlers"
    );
    assert!(dom.contains("id=\"budgets\""), "budget burn");
    assert!(dom.contains("id=\"advice\""), "the advice");
    assert!(
        !dom.contains("Some(") && !dom.contains(" { "),
        "no debug formatting on the page"
    );
    assert!(
        dom.contains(">research<") && dom.contains(">serving<"),
        "teams"
    );
    // The device table sorts and filters; nothing sticks out at any width.
    let (_, html) = s.get("/");
    let shots = repo().join("target/screenshots");
    std::fs::create_dir_all(&shots).expect("screenshots dir");
    let first_device = api["devices"][0]["id"].as_str().expect("id").to_owned();
    let device_url = format!("{}/device?id={}", s.base, first_device.replace('/', "%2F"));
    for width in [1400u32, 420] {
        for (name, url) in [
            ("dashboard", format!("{}/", s.base)),
            ("device", device_url.clone()),
        ] {
            let png = shots.join(format!("{name}-{width}.png"));
            let _ = std::fs::remove_file(&png);
            headless_url(
                browser,
                width,
                &[&format!("--screenshot={}", png.display())],
                &url,
            );
            assert!(
                std::fs::metadata(&png).is_ok_and(|m| m.len() > 10_000),
                "{}",
                png.display()
            );
        }
        let found = interact(browser, width, &html, dir.path());
        let devices = api["devices"].as_array().expect("devices").len();
        for want in [
            format!("rows:{devices}"),
            "sorted".into(),
            "filtered".into(),
            "fits".into(),
            "headline-first".into(),
            "cost-first".into(),
            "money-visible".into(),
            "evidence-wraps".into(),
            "labels-legible".into(),
            "no-data-hatched".into(),
        ] {
            assert!(
                found.split(' ').any(|w| w == want),
                "at {width} px: {found}"
            );
        }
    }
    let (code, page) = s.get(&format!("/device?id={}", first_device.replace('/', "%2F")));
    assert_eq!(code, 200);
    assert!(page.contains("<svg"), "the device's charts");
    // The display name every page shows finds the same device.
    let name = api["devices"][0]["name"].as_str().expect("name");
    assert_ne!(name, first_device);
    let (code, by_name) = s.get(&format!("/device?id={}", name.replace('/', "%2F")));
    assert_eq!(code, 200, "{by_name}");
    assert_eq!(by_name, page);
    let (code, body) = s.get("/device?id=no-such%2Fgpu9");
    assert_eq!(code, 404, "{body}");
}

/// Sort the device table by idle cost (two clicks: descending), filter it by one device's name,
/// and measure the page, in a copy of the page with a checking script.
fn interact(browser: &str, width: u32, html: &str, dir: &Path) -> String {
    let script = r#"<script>
window.addEventListener('load', () => {
  const out = [];
  const t = document.getElementById('devices');
  const rows = () => Array.from(t.tBodies[0].rows);
  out.push('rows:' + rows().length);
  const th = t.tHead.rows[0].cells[2];
  th.click(); th.click();
  const v = rows().map(r => { const x = r.cells[2].getAttribute('data-v'); return x === '' ? -Infinity : +x; });
  out.push(v.every((x, i) => i === 0 || v[i - 1] >= x) && th.getAttribute('data-sort') === 'desc' ? 'sorted' : 'NOT-SORTED');
  const f = document.getElementById('filter');
  f.value = rows()[0].cells[0].textContent;
  f.dispatchEvent(new Event('input'));
  const shown = rows().filter(r => r.style.display !== 'none').length;
  out.push(shown >= 1 && shown < rows().length ? 'filtered' : 'NOT-FILTERED:' + shown);
  const vw = document.documentElement.clientWidth;
  let wide = 0;
  for (const e of document.body.querySelectorAll('*')) {
    if (e.closest('.scroll')) continue;
    if (e.getBoundingClientRect().right > vw + 1) wide++;
  }
  out.push(document.documentElement.scrollWidth <= vw && wide === 0 ? 'fits' : 'WIDER:' + wide);
  // The answer leads: the headline before the cards and every section; the first card is cost.
  const h = document.getElementById('headline');
  const before = (a, b) => a && b && (a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING);
  out.push(before(h, document.getElementById('kpis')) && before(h, document.querySelector('h2')) ? 'headline-first' : 'HEADLINE-NOT-FIRST');
  out.push(document.querySelector('#kpis [data-kpi]').getAttribute('data-kpi') === 'cost_usd' ? 'cost-first' : 'COST-NOT-FIRST');
  // Money is on screen without scrolling sideways, at every width.
  const heads = Array.from(t.tHead.rows[0].cells);
  const money = heads.filter(c => c.textContent === 'COST' || c.textContent === 'IDLE $');
  out.push(money.length === 2 && money.every(c => c.getBoundingClientRect().right <= vw + 1) ? 'money-visible' : 'MONEY-HIDDEN');
  // The advice's evidence wraps: it is never wider than its cell.
  const ev = Array.from(document.querySelectorAll('#advice td.wrap'));
  out.push(ev.length > 0 && ev.every(c => getComputedStyle(c).whiteSpace === 'normal' && c.scrollWidth <= c.clientWidth + 1) ? 'evidence-wraps' : 'EVIDENCE-CLIPPED');
  // Chart labels at least 10 px high on the screen.
  let smallest = Infinity;
  for (const svg of document.querySelectorAll('.chart svg')) {
    const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    for (const txt of svg.querySelectorAll('text')) {
      smallest = Math.min(smallest, parseFloat(getComputedStyle(txt).fontSize) * scale);
    }
  }
  out.push(smallest >= 10 ? 'labels-legible' : 'LABELS:' + smallest.toFixed(1));
  // No data is hatched, every hour with data is a colour: never the same look.
  const cells = Array.from(document.querySelectorAll('.chart rect[data-util]'));
  const none = cells.filter(c => c.getAttribute('data-util') === 'none');
  out.push(none.length > 0 && none.every(c => c.getAttribute('fill') === 'url(#nodata)') && cells.filter(c => c.getAttribute('data-util') !== 'none').every(c => c.getAttribute('fill').startsWith('rgb(')) ? 'no-data-hatched' : 'NO-DATA-LOOKS-LIKE-DATA');
  document.title = out.join(' ');
});
</script>"#;
    let copy = dir.join(format!("dashboard-{width}.html"));
    std::fs::write(&copy, html.replace("</body>", &format!("{script}</body>"))).expect("copy");
    let dom = headless(browser, width, &["--dump-dom"], &copy);
    let start = dom.find("<title>").expect("a title") + 7;
    let end = dom[start..].find("</title>").expect("title end") + start;
    dom[start..end].to_owned()
}

/// `serve` over 12 generated GPUs × 3 days in `dir`, two teams, one with a budget, the clock
/// pinned inside the data's month.
fn served_team_fleet(dir: &Path) -> crate::serve::Served {
    let data = dir.join("fleet");
    let g = run(&[
        "generate",
        "--out",
        &data.display().to_string(),
        "--gpus",
        "12",
        "--days",
        "3",
        "--interval",
        "5m",
        "--format",
        "nvidia-smi",
        "--seed",
        "5",
        "--start",
        "2026-11-20",
    ]);
    assert_eq!(g.code, 0, "{}", g.stderr);
    std::fs::remove_file(data.join("truth.json")).expect("truth");
    let teams = dir.join("teams.toml");
    std::fs::write(
        &teams,
        "[hosts]\n\"train-a100-1\" = \"research\"\n\"train-a100-2\" = \"serving\"\n",
    )
    .expect("teams");
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        "[budget]\nmonthly_usd = { research = 1500, serving = 100000 }\n",
    )
    .expect("policy");
    crate::serve::Served::start(
        &[
            &data.display().to_string(),
            "--teams",
            &teams.display().to_string(),
            "--policy",
            &policy.display().to_string(),
        ],
        &[("GPUWISE_NOW", "2026-11-23T12:00:00Z")],
    )
}

/// The sign-in page of a server that needs a token, as Chromium builds it at desktop and phone
/// widths: the form is there (no script), and the dashboard sends a browser to it.
#[test]
fn the_sign_in_page_at_every_width() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let data = crate::serve::fleet(dir.path(), "2", "1");
    let s = crate::serve::Served::start(
        &[&data, "--token-env", "GPUWISE_TEST_TOKEN"],
        &[("GPUWISE_TEST_TOKEN", "s3cret-token")],
    );
    let shots = repo().join("target/screenshots");
    std::fs::create_dir_all(&shots).expect("screenshots dir");
    for width in [1400u32, 420] {
        // The dashboard's address: the browser lands on the form.
        let dom = headless_url(browser, width, &["--dump-dom"], &format!("{}/", s.base));
        assert!(
            dom.contains("id=\"token\"")
                && dom.contains("type=\"password\"")
                && dom.contains("Sign in"),
            "{dom}"
        );
        let png = shots.join(format!("sign-in-{width}.png"));
        let _ = std::fs::remove_file(&png);
        headless_url(
            browser,
            width,
            &[&format!("--screenshot={}", png.display())],
            &format!("{}/login", s.base),
        );
        assert!(
            std::fs::metadata(&png).is_ok_and(|m| m.len() > 2_000),
            "{}",
            png.display()
        );
    }
}

/// The jobs page (`gpuwise jobs --format html`, what `serve`'s /jobs shows): the answer first,
/// every flag's evidence, nothing wider than the screen; screenshots beside the report's.
#[test]
fn the_jobs_page_leads_with_the_answer_at_every_width() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("jobs.html");
    let page_text = page.display().to_string();
    let o = crate::jobs::planted(9).jobs(&["--format", "html", "-o", &page_text]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let html = std::fs::read_to_string(&page).expect("page");
    assert!(!html.contains("<script"), "the page runs no script");
    for want in [
        "unused_gpus",
        "idle_tail",
        "memory_oversized",
        "Per account",
    ] {
        assert!(html.contains(want), "{want} on the page");
    }
    for (width, found) in screens(browser, "jobs", &page, &html, dir.path()) {
        assert!(!found.contains("right-th:0"), "at {width} px: {found}");
    }
}

/// The review page (`gpuwise review --format html`): the answer first, the spend chart, every
/// planted action's outcome, nothing wider than the screen; screenshots beside the others.
#[test]
fn the_review_page_leads_with_the_answer_at_every_width() {
    let Some(browser) = chromium() else { return };
    let (tmp, logs, store) = crate::history::planted();
    crate::history::log_and_mark(&logs, &store, &tmp.path().join("store"));
    let page = tmp.path().join("review.html");
    let page_text = page.display().to_string();
    let o = crate::common::run(&[
        "review", "--store", &store, "--month", "2026-10", "--cloud", "aws", "--format", "html",
        "-o", &page_text,
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let html = std::fs::read_to_string(&page).expect("page");
    assert!(!html.contains("<script"), "the page runs no script");
    for want in [
        "<svg",
        "Actions: predicted and realized",
        "realized",
        "not_realized",
        "targets_vanished",
        "Fleet by period",
    ] {
        assert!(html.contains(want), "{want} on the page");
    }
    for (width, found) in screens(browser, "review", &page, &html, tmp.path()) {
        assert!(!found.contains("right-th:0"), "at {width} px: {found}");
    }
}
