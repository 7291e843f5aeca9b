#![no_main]
//! Fuzz the readers of the other inputs: spot traces (SkyPilot JSON, event and generic CSV),
//! request traces for `simulate serve`, Hugging Face model configs, team and policy files.
//! Any bytes, no panic and no allocation the input does not justify (the trace readers bound
//! their ticks, which a huge `gap_seconds` or time once made abort).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = gpuwise_sim::trace::Trace::from_skypilot_json(&text, "fuzz.json");
    let _ = gpuwise_sim::trace::Trace::from_events_csv(&text, 60.0, "fuzz-events.csv");
    let _ = gpuwise_sim::trace::Trace::from_generic_csv(&text, 60.0, "fuzz-trace.csv");
    let _ = gpuwise_sim::traffic::parse(&text, "fuzz-requests.csv");
    let _ = gpuwise_plan::model::Model::from_hf_config(&text, "fuzz-config.json");
    let _ = gpuwise_core::teams::TeamMap::from_toml(&text, "fuzz-teams.toml");
    let _ = gpuwise_ledger::check::Policy::from_toml(&text, "fuzz-policy.toml");
});
