//! The numeric helpers of the figure benches (`benches/support/`): the tick labels of the plot
//! helper and the theoretical sensitivity ratio of Nicolas et al. Approximation 5.1.

#[path = "../benches/support/plot.rs"]
mod plot;
#[path = "../benches/support/ratio.rs"]
mod ratio;

use plot::{Chart, Series, axis_label, draw_svg, line_chart, tick_label};
use ratio::theoretical_ratio;

#[test]
fn tick_labels_are_written_as_a_person_writes_them() {
    let cases = [
        (9.999_999e-6, "1e-5"),
        (1e-5, "1e-5"),
        (9.999_999_999e-5, "1e-4"),
        (2.5e-7, "2.5e-7"),
        (0.001, "0.001"),
        (0.1, "0.1"),
        (0.1 + 0.2, "0.3"),
        (1.0, "1"),
        (10.0, "10"),
        (20_000.0, "20000"),
        (123_456.0, "123456"),
        (1e6, "1e6"),
        (1_234_567.0, "1.23457e6"),
        (-0.25, "-0.25"),
        (0.0, "0"),
    ];
    for (value, expected) in cases {
        assert_eq!(tick_label(value), expected, "tick_label({value:e})");
    }
}

#[test]
fn wide_log_axes_label_only_one_two_and_five() {
    let wide = (1e-6, 1.0);
    assert_eq!(axis_label(9.999_999e-6, true, wide), "1e-5");
    assert_eq!(axis_label(2e-3, true, wide), "0.002");
    assert_eq!(axis_label(0.05, true, wide), "0.05");
    assert_eq!(axis_label(3e-4, true, wide), "");
    assert_eq!(axis_label(40_000.0, true, (1e3, 1e5)), "");
    // A log axis within one decade, and any linear axis, keep every label.
    assert_eq!(axis_label(0.3, true, (0.2, 0.9)), "0.3");
    assert_eq!(axis_label(3e-4, false, wide), "3e-4");
}

#[test]
fn theoretical_ratio_matches_eq_19_and_20() {
    // k = 1: Δᵃ = √1·max abs(Q_i1) = Δᵇ, and eq. 19 equals eq. 20.
    assert!((theoretical_ratio(1, 8_000) - 1.0).abs() < 1e-12);
    // Values computed independently from eq. 19–20 (μ = n/(n−2), σ² = 2n²(n−1)/((n−2)²(n−4))).
    let close = |k: usize, n: usize, expected: f64| (theoretical_ratio(k, n) - expected).abs() < 1e-12;
    assert!(close(64, 8_000, 2.171_861_476_239_597_4));
    assert!(close(4_000, 8_000, 2.917_002_072_125_833));
    assert!(close(64, 12_000, 2.176_013_280_178_634_3));
    assert!(close(4_000, 12_000, 2.929_245_406_714_232_4));
}

fn chart(log_x: bool, log_y: bool) -> Chart<'static> {
    Chart {
        title: "t",
        x_label: "x",
        y_label: "y",
        log_x,
        log_y,
        y_range: None,
    }
}

#[test]
fn every_axis_combination_renders_with_clean_labels() {
    // y from 1e-6 to 1e-3: plotters' own labels on this axis were 9.999999999e-6 and the like.
    let series = [Series {
        name: "s".into(),
        points: vec![(1.0, 1e-6), (10.0, 1e-5), (100.0, 1e-4), (1_000.0, 1e-3)],
    }];
    let svg = draw_svg(&chart(true, true), &series).expect("drawn");
    let texts: Vec<&str> = svg
        .split("</text>")
        .filter_map(|chunk| chunk.rsplit_once('>').map(|(_, text)| text.trim()))
        .collect();
    for label in ["1e-6", "1e-5", "0.001", "10", "1000"] {
        assert!(texts.contains(&label), "no label {label} in {texts:?}");
    }
    assert!(
        !texts.iter().any(|t| t.contains("9999")),
        "unrounded label in {texts:?}"
    );
    let dir = tempfile::tempdir().expect("temporary directory");
    for (log_x, log_y) in [(false, false), (true, false), (false, true), (true, true)] {
        let path = dir.path().join(format!("{log_x}_{log_y}.png"));
        line_chart(&path, &chart(log_x, log_y), &series).expect("rendered");
        let bytes = std::fs::read(&path).expect("written");
        assert!(bytes.starts_with(b"\x89PNG"), "{} is not a PNG", path.display());
    }
}
