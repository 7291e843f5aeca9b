#![no_main]
//! Fuzz the Prometheus API response reader: any bytes, no panic.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = gpuwise_prom::api::parse(data);
});
