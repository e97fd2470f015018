//! Symmetric matrices: stored as their exact symmetrisation; shape and symmetry errors.

use super::*;

#[test]
fn symmetric_matrix_is_stored_as_its_exact_symmetrisation() {
    let text = "1,2,3\n2.000000000001,5,6\n3,6,9\n";
    let (got, v) = run_with(text.as_bytes(), Format::Csv, Shape::SymmetricMatrix, LIMITS).expect("valid");
    assert_eq!(got, shape(3, 3));
    let mean = (2.0 + 2.000000000001) / 2.0;
    assert_eq!(v, [1.0, mean, 3.0, mean, 5.0, 6.0, 3.0, 6.0, 9.0]);
}

#[test]
fn symmetric_matrix_errors() {
    let sym = |text: &str, limits| run_with(text.as_bytes(), Format::Csv, Shape::SymmetricMatrix, limits);
    assert!(matches!(
        sym("1,2,3\n4,5,6\n", LIMITS),
        Err(IngestError::NotSquare { rows: 2, cols: 3 })
    ));
    assert!(matches!(
        sym("1,2\n2,1\n0,0\n", LIMITS),
        Err(IngestError::NotSquare { rows: 3, cols: 2 })
    ));
    assert!(matches!(
        sym("1,2,3\n2,1,0\n3,0.5,1\n", LIMITS),
        Err(IngestError::NotSymmetric { row: 2, col: 3 })
    ));
    let narrow = Limits { max_d: 2, ..LIMITS };
    assert!(matches!(
        sym("1,0,0\n0,1,0\n0,0,1\n", narrow),
        Err(IngestError::TooManyColumns { d: 3, max: 2 })
    ));
    let err = run_with(
        b"[[1, 2], [2, 1], [0, 0]]",
        Format::Json,
        Shape::SymmetricMatrix,
        LIMITS,
    );
    assert!(matches!(err, Err(IngestError::NotSquare { rows: 3, cols: 2 })));
}
