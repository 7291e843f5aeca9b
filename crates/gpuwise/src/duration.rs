//! Durations on the command line: the one grammar of [`gpuwise_core::duration`] (`90s`,
//! `10m`, `1.5h`, `2d`, `2w`, `500ms`; a number needs its unit), with the flag's name in
//! messages.

/// Milliseconds of a duration string.
pub(crate) fn parse_ms(s: &str) -> Result<u64, String> {
    gpuwise_core::duration::parse_ms(s).map_err(|e| e.0)
}

/// Milliseconds of a duration that must be longer than zero (a timeout, an interval, a
/// window): `0s` is refused with the flag's name rather than dividing by zero later.
pub(crate) fn parse_positive_ms(flag: &str, s: &str) -> Result<u64, String> {
    match parse_ms(s) {
        Ok(0) => Err(format!("--{flag}: `{s}` must be longer than zero")),
        Ok(ms) => Ok(ms),
        Err(e) => Err(format!("--{flag}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn flags_name_themselves() {
        assert_eq!(
            super::parse_positive_ms("timeout", "0s"),
            Err("--timeout: `0s` must be longer than zero".to_owned())
        );
        assert_eq!(super::parse_positive_ms("timeout", "2s"), Ok(2000));
        assert_eq!(
            super::parse_positive_ms("deadline", "48"),
            Err("--deadline: `48` has no unit: write 48s, 48m, 48h, 48d or 48w".to_owned())
        );
    }
}
