//! JSON answers. Report text is hostile (T28): besides being JSON-escaped,
//! `<`, `>` and `&` are written as `\u003c`, `\u003e`, `\u0026`, so a
//! response body never contains markup even if some client renders it as
//! HTML. (Outside strings JSON has none of these characters, so replacing
//! them in the serialized text only ever touches string contents.)

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// `value` as a JSON response with `status`.
pub fn json_response<T: Serialize>(status: StatusCode, value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => {
            let mut response = (status, escape_markup(bytes)).into_response();
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            response
        }
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot serialize the answer: {e}"),
        )
            .into_response(),
    }
}

/// `{"error": message}` with `status`.
pub fn error(status: StatusCode, message: &str) -> Response {
    json_response(status, &serde_json::json!({ "error": message }))
}

fn escape_markup(bytes: Vec<u8>) -> Vec<u8> {
    if !bytes.iter().any(|b| matches!(b, b'<' | b'>' | b'&')) {
        return bytes;
    }
    let mut out = Vec::with_capacity(bytes.len() + 32);
    for b in bytes {
        match b {
            b'<' => out.extend_from_slice(b"\\u003c"),
            b'>' => out.extend_from_slice(b"\\u003e"),
            b'&' => out.extend_from_slice(b"\\u0026"),
            _ => out.push(b),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped_and_the_json_still_means_the_same() {
        let value = serde_json::json!({"p": "<script>alert(1)</script> & \"x\""});
        let bytes = escape_markup(serde_json::to_vec(&value).unwrap());
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(!text.contains('<') && !text.contains('>') && !text.contains('&'));
        let back: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, value);
    }
}
