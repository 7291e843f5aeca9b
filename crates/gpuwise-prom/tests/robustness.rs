//! No response body makes the Prometheus API reader panic: random bytes, and a valid matrix
//! response with random damage (the cargo-fuzz target `prometheus` runs the same entry).

use proptest::prelude::*;

const MATRIX: &str = r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","UUID":"GPU-1"},"values":[[1767607200,"50"],[1767607215.5,"NaN"]]}]},"warnings":["partial"]}"#;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn random_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = gpuwise_prom::api::parse(&data);
    }

    #[test]
    fn damaged_responses_never_panic(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..12),
    ) {
        let mut v = MATRIX.as_bytes().to_vec();
        for (at, byte) in edits {
            let i = at.index(v.len());
            v[i] = byte;
        }
        let _ = gpuwise_prom::api::parse(&v);
    }
}

#[test]
fn the_undamaged_response_parses() {
    let r = gpuwise_prom::api::parse(MATRIX.as_bytes()).expect("parses");
    assert_eq!(r.warnings, ["partial"]);
}
