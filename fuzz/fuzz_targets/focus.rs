#![no_main]
//! Fuzz the FOCUS bill reader and the bill it builds: any bytes, as CSV and as Parquet, no
//! panic; the CSV's rows folded into a bill (charges joined into runs, duplicates and overlaps
//! found) and finished.

static QUIET: std::sync::Once = std::sync::Once::new();
static CATALOG: std::sync::OnceLock<gpuwise_catalog::Catalog> = std::sync::OnceLock::new();
static JOIN: std::sync::OnceLock<gpuwise_ledger::bill::JoinKey> = std::sync::OnceLock::new();
// Made once: a builder indexes the catalog's instance types; each input gets a fork of it.
static EMPTY: std::sync::OnceLock<gpuwise_ledger::bill::BillBuilder<'static>> =
    std::sync::OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // libfuzzer-sys's hook aborts on any panic, before `read_parquet` can catch the Parquet
    // decoder's (it turns them into errors). A panic that escapes the reader still aborts:
    // libfuzzer-sys catches it at the target's edge and aborts.
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    let mut rows = 0u64;
    let mut bill = EMPTY
        .get_or_init(|| {
            let catalog = CATALOG.get_or_init(gpuwise_catalog::Catalog::builtin);
            let join = JOIN.get_or_init(|| gpuwise_ledger::bill::JoinKey::Name);
            gpuwise_ledger::bill::BillBuilder::new(catalog, join, "team")
        })
        .fork();
    let _ = gpuwise_ledger::focus::read_csv(data, "fuzz.csv", &mut |r| {
        rows += 1;
        bill.add(r);
    });
    let _ = bill.finish();
    let _ = gpuwise_ledger::focus::read_parquet(
        bytes::Bytes::copy_from_slice(data),
        "fuzz.parquet",
        &mut |_| rows += 1,
    );
});
