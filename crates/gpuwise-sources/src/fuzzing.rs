//! Entry points that run one reader on arbitrary bytes, for the fuzz targets (`fuzz/`) and the
//! robustness tests. Each must return without panicking whatever the bytes are.

use gpuwise_core::profile::ProfileBuilder;
use gpuwise_core::records::{MAX_LINE, RecordLimit};
use gpuwise_core::settings::ProfileSettings;
use jiff::tz::TimeZone;

use crate::diag::Tally;
use crate::generic::ColumnMap;
use crate::ingest::{ReadOptions, detect};
use crate::origin::Origin;
use crate::time::LocalClock;
use crate::{dcgm, dmon, generic, smi};

const SMI_COLUMNS: &str = "timestamp, name, uuid, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]";
const ORIGIN: Origin<'static> = Origin {
    file: "fuzz",
    host: None,
    stem: "fuzz",
};

fn finish(b: ProfileBuilder) {
    let st = ProfileSettings::default();
    let _ = b.build().finish(&st, &TimeZone::UTC);
}

/// nvidia-smi CSV: the first line as header when it is one, else a fixed layout.
pub fn smi(data: &[u8]) {
    let _ = detect(data, &ReadOptions::default());
    let first = String::from_utf8_lossy(data.split(|c| *c == b'\n').next().unwrap_or_default())
        .into_owned();
    let names: Vec<String> = if smi::looks_like_header(&first) {
        first.split(',').map(str::to_owned).collect()
    } else {
        SMI_COLUMNS.split(',').map(str::to_owned).collect()
    };
    let Ok(layout) = smi::Layout::new(&names, Some(first.into_bytes())) else {
        return;
    };
    let mut b = ProfileBuilder::new(ProfileSettings::default());
    let mut t = Tally::default();
    smi::SmiReader::new(&layout, "fuzz", "h", false, LocalClock::new(TimeZone::UTC))
        .read(data, &mut b, &mut t);
    finish(b);
}

/// dmon: the first line as header when it is one, else timed and untimed fixed layouts.
pub fn dmon(data: &[u8]) {
    let first = String::from_utf8_lossy(data.split(|c| *c == b'\n').next().unwrap_or_default())
        .into_owned();
    for header in [
        first.as_str(),
        "#Date       Time        gpu    pwr     sm    mem     fb",
        "# gpu pwr sm mem fb",
    ] {
        if let Ok(layout) = dmon::Layout::from_header(header) {
            let mut b = ProfileBuilder::new(ProfileSettings::default());
            let mut t = Tally::default();
            dmon::DmonReader::new(
                &layout,
                "fuzz",
                "h",
                LocalClock::new(TimeZone::UTC),
                Some(0),
                1000,
            )
            .read(data, &mut b, &mut t);
            finish(b);
        }
    }
}

/// DCGM text, read in both orders.
pub fn dcgm(data: &[u8]) {
    for order in [dcgm::Order::ByScrape, dcgm::Order::BySeries] {
        let mut b = ProfileBuilder::new(ProfileSettings::default());
        let mut t = Tally::default();
        let _ = dcgm::read(
            &mut std::io::Cursor::new(data),
            order,
            &ORIGIN,
            Some(1_767_607_200_000),
            &mut b,
            &mut t,
        );
        finish(b);
    }
}

/// Generic CSV with a fixed column map.
pub fn csv(data: &[u8]) {
    let Ok(map) =
        ColumnMap::parse(&["timestamp=ts,device=gpu,util=util,mem_used_mib=mem".to_owned()])
    else {
        return;
    };
    let mut b = ProfileBuilder::new(ProfileSettings::default());
    let mut t = Tally::default();
    let _ = generic::read(
        &mut RecordLimit::new(data, MAX_LINE, b','),
        &map,
        &ORIGIN,
        &mut LocalClock::new(TimeZone::UTC),
        &mut b,
        &mut t,
    );
    finish(b);
}

/// File names: the host a name implies and the time stamped in it, for any text.
pub fn file_names(data: &[u8]) {
    let name = String::from_utf8_lossy(data);
    let host = crate::input::host_of_file_name(&name);
    assert!(
        name.starts_with(host.as_str()),
        "a host is a prefix of its file name"
    );
    let _ = crate::input::stamp_in_name(&name);
}
