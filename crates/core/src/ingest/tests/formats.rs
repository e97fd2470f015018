//! What the formats share: their media types, the stored layout read back as Xᵀ, and that the
//! three formats of the same matrix store the same bytes.

use proptest::prelude::*;

use super::*;

#[test]
fn content_types() {
    assert_eq!(Format::from_content_type("text/csv"), Some(Format::Csv));
    assert_eq!(
        Format::from_content_type("Text/CSV; charset=utf-8"),
        Some(Format::Csv)
    );
    assert_eq!(
        Format::from_content_type(" application/json ;charset=UTF-8"),
        Some(Format::Json)
    );
    assert_eq!(Format::from_content_type("application/x-npy"), Some(Format::Npy));
    for other in [
        "",
        "text/plain",
        "application/octet-stream",
        "text/csvx",
        "multipart/form-data",
    ] {
        assert_eq!(Format::from_content_type(other), None, "{other}");
    }
    for f in [Format::Csv, Format::Json, Format::Npy] {
        assert_eq!(Format::from_content_type(f.content_type()), Some(f));
    }
}

#[test]
fn ingested_records_load_back_as_the_transpose() {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    let got = ingest(
        &b"1,2,3\n4,5,6\n"[..],
        Format::Csv,
        RAW,
        &LIMITS,
        file.as_file_mut(),
    )
    .expect("valid");
    let data = open(file.path(), got.n as usize, got.d as usize).expect("open");
    let xt = data.records();
    assert_eq!(xt.shape(), (3, 2));
    assert_eq!(xt.column(1).as_slice(), &[4.0, 5.0, 6.0]);
}

fn finite() -> impl Strategy<Value = f64> {
    use prop::num::f64::{NEGATIVE, NORMAL, POSITIVE, SUBNORMAL, ZERO};
    POSITIVE | NEGATIVE | NORMAL | SUBNORMAL | ZERO
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn csv_json_and_npy_of_the_same_matrix_store_the_same_bytes(
        rows in (1usize..6).prop_flat_map(|d| prop::collection::vec(prop::collection::vec(finite(), d), 1..20)),
        header in any::<bool>(),
        alpha in prop::option::of(0.5f64..2.0),
    ) {
        let d = rows[0].len();
        let mut text = String::new();
        if header {
            text += &(1..=d).map(|j| format!("col{j}")).collect::<Vec<_>>().join(",");
            text += "\n";
        }
        for row in &rows {
            text += &row.iter().map(f64::to_string).collect::<Vec<_>>().join(",");
            text += "\n";
        }
        let json_text = serde_json::to_string(&rows).expect("serialize");
        let bounds = Shape::Records { beta: 1.0, alpha };
        let mut outputs = Vec::new();
        for (input, format) in [(text.into_bytes(), Format::Csv), (json_text.into_bytes(), Format::Json), (npy64(&rows), Format::Npy)] {
            let mut out = Vec::new();
            let got = ingest(input.as_slice(), format, bounds, &LIMITS, &mut out);
            prop_assert!(got.is_ok(), "{format:?}: {got:?}");
            outputs.push(out);
        }
        prop_assert_eq!(&outputs[0], &outputs[1]);
        prop_assert_eq!(&outputs[0], &outputs[2]);
    }
}
