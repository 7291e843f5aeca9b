//! Prometheus HTTP API responses (`/api/v1/query`, `/api/v1/query_range`): the envelope, its
//! errors and warnings, and the vector, matrix and scalar results, into typed series.
//!
//! Sample values are strings in the API (JSON has no NaN or ±Inf): `"NaN"`, `"+Inf"` and
//! `"-Inf"` parse to those floats, anything else that is not a number is an error naming the
//! series. Timestamps are Unix seconds with a fraction and become milliseconds. A response
//! with `"status": "error"` becomes [`ResponseError::Api`] with Prometheus' `errorType` and
//! message; `warnings` and `infos` are kept, so partial results can be marked as such.

use std::collections::BTreeMap;

use gpuwise_core::EpochMs;
use serde::Deserialize;

/// One series of a result: its labels and its samples in time order.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Labels, `__name__` included when the query kept it.
    pub labels: BTreeMap<String, String>,
    /// `(milliseconds, value)`.
    pub samples: Vec<(EpochMs, f64)>,
}

/// A successful response.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    /// `matrix`, `vector`, `scalar` or `string`.
    pub result_type: String,
    /// The series (a scalar is one series without labels).
    pub series: Vec<Series>,
    /// Warnings the server attached (the result may be partial).
    pub warnings: Vec<String>,
    /// Informational notes the server attached.
    pub infos: Vec<String>,
}

/// Why a response could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ResponseError {
    /// Not JSON, or not the API's shape.
    #[error("not a Prometheus API response: {0}")]
    Shape(String),
    /// The server answered with an error.
    #[error("Prometheus error `{error_type}`: {message}")]
    Api {
        /// `bad_data`, `execution`, `timeout`, …
        error_type: String,
        /// The server's message.
        message: String,
    },
    /// A sample that is not a number.
    #[error("series {series}: sample value `{value}` is not a number")]
    Value {
        /// The series' labels.
        series: String,
        /// The value as sent.
        value: String,
    },
}

#[derive(Deserialize)]
struct Envelope {
    status: String,
    data: Option<Data>,
    #[serde(rename = "errorType")]
    error_type: Option<String>,
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
    #[serde(default)]
    infos: Vec<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: serde_json::Value,
}

#[derive(Deserialize)]
struct RawSeries {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    #[serde(default)]
    values: Vec<(f64, String)>,
    value: Option<(f64, String)>,
}

fn sample(
    ts: f64,
    v: &str,
    labels: &BTreeMap<String, String>,
) -> Result<(EpochMs, f64), ResponseError> {
    let value = match v {
        "NaN" => f64::NAN,
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        other => other.parse().map_err(|_| ResponseError::Value {
            series: format!("{labels:?}"),
            value: other.to_owned(),
        })?,
    };
    if !ts.is_finite() {
        return Err(ResponseError::Shape(format!(
            "timestamp `{ts}` is not a number"
        )));
    }
    #[allow(clippy::cast_possible_truncation)]
    Ok(((ts * 1000.0).round() as EpochMs, value))
}

/// Parse a response body.
pub fn parse(body: &[u8]) -> Result<Response, ResponseError> {
    let env: Envelope =
        serde_json::from_slice(body).map_err(|e| ResponseError::Shape(e.to_string()))?;
    if env.status != "success" {
        return Err(ResponseError::Api {
            error_type: env.error_type.unwrap_or_else(|| "unknown".into()),
            message: env
                .error
                .unwrap_or_else(|| format!("status `{}`", env.status)),
        });
    }
    let data = env
        .data
        .ok_or_else(|| ResponseError::Shape("`data` is missing".into()))?;
    let mut series = Vec::new();
    match data.result_type.as_str() {
        "matrix" | "vector" => {
            let raw: Vec<RawSeries> = serde_json::from_value(data.result)
                .map_err(|e| ResponseError::Shape(e.to_string()))?;
            for r in raw {
                let mut samples = Vec::with_capacity(r.values.len() + 1);
                for (ts, v) in r.values.iter().chain(r.value.iter()) {
                    samples.push(sample(*ts, v, &r.metric)?);
                }
                series.push(Series {
                    labels: r.metric,
                    samples,
                });
            }
        }
        "scalar" => {
            let (ts, v): (f64, String) = serde_json::from_value(data.result)
                .map_err(|e| ResponseError::Shape(e.to_string()))?;
            let labels = BTreeMap::new();
            series.push(Series {
                samples: vec![sample(ts, &v, &labels)?],
                labels,
            });
        }
        "string" => {}
        other => {
            return Err(ResponseError::Shape(format!(
                "unknown resultType `{other}`"
            )));
        }
    }
    Ok(Response {
        result_type: data.result_type,
        series,
        warnings: env.warnings,
        infos: env.infos,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_vector_scalar_and_specials() {
        let r = parse(br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"up","job":"a"},"values":[[1435781430.781,"1"],[1435781445.781,"NaN"],[1435781460.781,"+Inf"]]}]},"warnings":["partial"]}"#).expect("valid");
        assert_eq!(r.series[0].labels["job"], "a");
        assert_eq!(r.series[0].samples[0], (1_435_781_430_781, 1.0));
        assert!(r.series[0].samples[1].1.is_nan());
        assert_eq!(r.series[0].samples[2].1, f64::INFINITY);
        assert_eq!(r.warnings, vec!["partial"]);
        let v = parse(br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1.5,"-2.25"]}]}}"#).expect("valid");
        assert_eq!(v.series[0].samples, vec![(1500, -2.25)]);
        let s = parse(br#"{"status":"success","data":{"resultType":"scalar","result":[2,"7"]}}"#)
            .expect("valid");
        assert_eq!(s.series[0].samples, vec![(2000, 7.0)]);
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let e = parse(br#"{"status":"error","errorType":"bad_data","error":"exceeded maximum resolution of 11,000 points per timeseries"}"#).expect_err("error");
        assert!(
            e.to_string()
                .contains("`bad_data`: exceeded maximum resolution"),
            "{e}"
        );
        let e = parse(br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"gpu":"0"},"value":[1,"abc"]}]}}"#).expect_err("bad value");
        assert!(e.to_string().contains("`abc` is not a number"), "{e}");
        assert!(parse(b"<html>502 Bad Gateway</html>").is_err());
        assert!(
            parse(br#"{"status":"success"}"#)
                .expect_err("no data")
                .to_string()
                .contains("`data` is missing")
        );
        assert!(
            parse(br#"{"status":"success","data":{"resultType":"histogram","result":[]}}"#)
                .is_err()
        );
    }
}
