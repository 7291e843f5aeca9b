#![no_main]
//! Fuzz the FOCUS bill reader: any bytes, as CSV and as Parquet, no panic.

static QUIET: std::sync::Once = std::sync::Once::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // libfuzzer-sys's hook aborts on any panic, before `read_parquet` can catch the Parquet
    // decoder's (it turns them into errors). A panic that escapes the reader still aborts:
    // libfuzzer-sys catches it at the target's edge and aborts.
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    let mut rows = 0u64;
    let _ = gpuwise_ledger::focus::read_csv(data, "fuzz.csv", &mut |_| rows += 1);
    let _ = gpuwise_ledger::focus::read_parquet(
        bytes::Bytes::copy_from_slice(data),
        "fuzz.parquet",
        &mut |_| rows += 1,
    );
});
