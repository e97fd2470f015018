//! `.npy` files: dtypes and byte orders, header versions, Fortran order, damaged and hostile
//! headers, the declared shape, non-finite values.

use super::*;

#[test]
fn npy_f64_and_f32_in_both_byte_orders() {
    let values = [1.5, -2.0, 0.25, 1e10, -3.0, 7.0];
    let f32s: Vec<f32> = values.iter().map(|&v| v as f32).collect();
    let files = [
        npy_file("<f8", false, &[2, 3], &le64(&values)),
        npy_file(
            ">f8",
            false,
            &[2, 3],
            &values.iter().flat_map(|v| v.to_be_bytes()).collect::<Vec<_>>(),
        ),
        npy_file(
            "<f4",
            false,
            &[2, 3],
            &f32s.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>(),
        ),
        npy_file(
            ">f4",
            false,
            &[2, 3],
            &f32s.iter().flat_map(|v| v.to_be_bytes()).collect::<Vec<_>>(),
        ),
    ];
    for file in files {
        let (got, v) = run(&file, Format::Npy).expect("valid");
        assert_eq!(got, shape(2, 3));
        assert_eq!(v, values);
    }
}

#[test]
fn npy_written_by_npyz_with_a_version_2_header() {
    use npyz::WriterBuilder;
    let values: Vec<f64> = (0..12).map(|i| i as f64 / 3.0).collect();
    let mut file = Vec::new();
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&[4, 3])
        .writer(&mut file)
        .begin_nd()
        .expect("npyz writer");
    writer.extend(values.iter().copied()).expect("write");
    writer.finish().expect("finish");
    let (got, v) = run(&file, Format::Npy).expect("valid");
    assert_eq!((got, v.as_slice()), (shape(4, 3), values.as_slice()));

    // The same file with a version 2.0 header (4-byte length).
    let text_len = u16::from_le_bytes([file[8], file[9]]) as usize;
    let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
    v2.extend((text_len as u32 + 2).to_le_bytes());
    v2.extend(&file[10..10 + text_len - 1]);
    v2.extend(b"  \n");
    v2.extend(&file[10 + text_len..]);
    assert_eq!(run(&v2, Format::Npy).expect("valid v2").1, values);
}

/// Integer and bool arrays (genotypes as int8, counts as int64) read as `astype(np.float64)`
/// gives, in either byte order; the sign of signed types is kept.
#[test]
fn npy_integer_and_bool_arrays_read_as_float64() {
    let values = [-3.0, 0.0, 2.0, 1.0, -128.0, 127.0];
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "|i1",
            values.iter().flat_map(|v| (*v as i8).to_le_bytes()).collect(),
        ),
        (
            "<i2",
            values.iter().flat_map(|v| (*v as i16).to_le_bytes()).collect(),
        ),
        (
            ">i4",
            values.iter().flat_map(|v| (*v as i32).to_be_bytes()).collect(),
        ),
        (
            "<i8",
            values.iter().flat_map(|v| (*v as i64).to_le_bytes()).collect(),
        ),
        (
            ">i8",
            values.iter().flat_map(|v| (*v as i64).to_be_bytes()).collect(),
        ),
    ];
    for (descr, data) in cases {
        let (got, v) = run(&npy_file(descr, false, &[2, 3], &data), Format::Npy).expect(descr);
        assert_eq!((got, v.as_slice()), (shape(2, 3), values.as_slice()), "{descr}");
    }
    let unsigned = [0.0, 1.0, 2.0, 255.0];
    let u1: Vec<u8> = unsigned.iter().map(|v| *v as u8).collect();
    assert_eq!(
        run(&npy_file("|u1", false, &[2, 2], &u1), Format::Npy)
            .expect("u1")
            .1,
        unsigned
    );
    let u8be: Vec<u8> = unsigned.iter().flat_map(|v| (*v as u64).to_be_bytes()).collect();
    assert_eq!(
        run(&npy_file(">u8", false, &[2, 2], &u8be), Format::Npy)
            .expect("u8")
            .1,
        unsigned
    );
    let wide: Vec<u8> = [1u64 << 35, (1 << 35) + 1]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let (_, v) = run(&npy_file("<u8", false, &[1, 2], &wide), Format::Npy).expect("wide");
    assert_eq!(v, [(1u64 << 35) as f64, ((1u64 << 35) + 1) as f64]);
    let b1 = [1u8, 0, 0, 1];
    assert_eq!(
        run(&npy_file("|b1", false, &[2, 2], &b1), Format::Npy)
            .expect("bool")
            .1,
        [1.0, 0.0, 0.0, 1.0]
    );
}

#[test]
fn npy_other_dtypes_and_ranks_are_unsupported() {
    let cases: [(&str, &[u64], usize, &str); 5] = [
        ("<c16", &[2, 2], 64, "'<c16'"),
        ("<f2", &[2, 2], 8, "'<f2'"),
        ("<U1", &[2, 2], 16, "'<U1'"),
        ("<f8", &[4], 32, "1 dimensions"),
        ("<f8", &[1, 2, 2], 32, "3 dimensions"),
    ];
    for (descr, dims, bytes, expected) in cases {
        let err = run(&npy_file(descr, false, dims, &vec![0; bytes]), Format::Npy).expect_err(descr);
        match &err {
            IngestError::UnsupportedNpy(message) => assert!(message.contains(expected), "{message}"),
            other => panic!("{descr} {dims:?}: expected UnsupportedNpy, got {other:?}"),
        }
    }
}

#[test]
fn npy_structured_dtype_is_unsupported() {
    let header = "{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (1, 1), }";
    let file = npy_with_header(header.to_string(), &[0u8; 8]);
    assert!(matches!(
        run(&file, Format::Npy),
        Err(IngestError::UnsupportedNpy(_))
    ));
}

/// The column-major bytes of `rows` (what `np.save` writes for an F-contiguous array).
fn column_major(rows: &[Vec<f64>]) -> Vec<f64> {
    (0..rows[0].len())
        .flat_map(|j| rows.iter().map(move |r| r[j]))
        .collect()
}

/// `fortran_order: True` records (`np.save(path, X[:, block])`, a transpose) read as the same
/// data as C order, also over several blocks of rows and in every dtype; truncated ones are
/// refused as C-ordered ones are.
#[test]
fn npy_fortran_ordered_records_are_the_same_data() {
    let rows: Vec<Vec<f64>> = (0..7)
        .map(|i| (0..3).map(|j| (10 * i + j) as f64 - 0.5).collect())
        .collect();
    let c_order: Vec<f64> = rows.iter().flatten().copied().collect();
    let from_c = run(&npy_file("<f8", false, &[7, 3], &le64(&c_order)), Format::Npy).expect("C order");
    let from_f = run(
        &npy_file("<f8", true, &[7, 3], &le64(&column_major(&rows))),
        Format::Npy,
    );
    assert_eq!(from_f.expect("Fortran order"), from_c);
    // Big-endian f32, column-major.
    let be32: Vec<u8> = column_major(&rows)
        .iter()
        .flat_map(|v| (*v as f32).to_be_bytes())
        .collect();
    let from_be = run(&npy_file(">f4", true, &[7, 3], &be32), Format::Npy).expect("big-endian f32");
    assert_eq!(from_be, from_c);
    // Two blocks of rows (a block holds 2^20 bytes of rows: 65 536 rows of two f64).
    let many: Vec<Vec<f64>> = (0..70_000).map(|i| vec![i as f64, -(i as f64)]).collect();
    let limits = Limits {
        max_bytes: 4 << 20,
        max_rows: 100_000,
        max_d: 100,
    };
    let c_many: Vec<f64> = many.iter().flatten().copied().collect();
    let (got, values) = run_with(
        &npy_file("<f8", true, &[70_000, 2], &le64(&column_major(&many))),
        Format::Npy,
        RAW,
        limits,
    )
    .expect("two blocks");
    assert_eq!((got, values), (shape(70_000, 2), c_many));
    // Truncated data and trailing bytes.
    let data = le64(&column_major(&rows));
    let short = npy_file("<f8", true, &[7, 3], &data[..data.len() - 8]);
    assert!(matches!(
        run(&short, Format::Npy),
        Err(IngestError::InvalidNpy(_))
    ));
    let mut long = npy_file("<f8", true, &[7, 3], &data);
    long.push(0);
    assert!(matches!(run(&long, Format::Npy), Err(IngestError::InvalidNpy(_))));
}

#[test]
fn npy_fortran_order_streams_where_it_cannot_matter() {
    let data = le64(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // A single column is the same bytes in either order.
    let (got, v) = run(&npy_file("<f8", true, &[6, 1], &data), Format::Npy).expect("column");
    assert_eq!((got, v[5]), (shape(6, 1), 6.0));
    // A symmetric matrix: column-major bytes of A are row-major bytes of Aᵀ.
    let a = [[2.0, 1.0 + 1e-12, 0.5], [1.0, 3.0, -1.0], [0.5, -1.0, 4.0]];
    let c_order: Vec<f64> = a.iter().flatten().copied().collect();
    let f_order: Vec<f64> = (0..3).flat_map(|j| a.iter().map(move |row| row[j])).collect();
    let sym = Shape::SymmetricMatrix;
    let from_c = run_with(
        &npy_file("<f8", false, &[3, 3], &le64(&c_order)),
        Format::Npy,
        sym,
        LIMITS,
    );
    let from_f = run_with(
        &npy_file("<f8", true, &[3, 3], &le64(&f_order)),
        Format::Npy,
        sym,
        LIMITS,
    );
    assert_eq!(from_c.expect("C order").1, from_f.expect("Fortran order").1);
}

#[test]
fn npy_damaged_files_are_invalid() {
    let good = npy64(&[vec![1.0, 2.0], vec![3.0, 4.0]]);
    let cases: [(Vec<u8>, &str); 5] = [
        (b"PK\x03\x04 not npy at all".to_vec(), "magic"),
        (good[..5].to_vec(), "too short"),
        (good[..40].to_vec(), "inside the header"),
        (good[..good.len() - 3].to_vec(), "ends early"),
        ([good.as_slice(), b"x"].concat(), "bytes follow"),
    ];
    for (file, expected) in cases {
        match run(&file, Format::Npy) {
            Err(IngestError::InvalidNpy(message)) => assert!(message.contains(expected), "{message}"),
            other => panic!("{expected}: expected InvalidNpy, got {other:?}"),
        }
    }
    let garbage = npy_file("<f8", false, &[2, 2], &[]);
    let garbage = String::from_utf8_lossy(&garbage)
        .replace("'shape'", "'shap!'")
        .into_bytes();
    assert!(matches!(
        run(&garbage, Format::Npy),
        Err(IngestError::InvalidNpy(_))
    ));
}

#[test]
fn npy_hostile_headers_are_refused_without_panic_or_allocation() {
    // A version 2 header claiming 1 GiB of header text.
    let mut huge = b"\x93NUMPY\x02\x00".to_vec();
    huge.extend((1u32 << 30).to_le_bytes());
    assert!(matches!(
        run(&huge, Format::Npy),
        Err(IngestError::UnsupportedNpy(_))
    ));
    // A shape whose element count overflows u64 (npyz would panic computing it).
    let overflow = npy_file("<f8", false, &[1 << 40, 1 << 40], &[]);
    assert!(matches!(
        run(&overflow, Format::Npy),
        Err(IngestError::InvalidNpy(_))
    ));
    let overflow = npy_file("<f8", false, &[0, 1 << 40, 1 << 40], &[]);
    assert!(matches!(
        run(&overflow, Format::Npy),
        Err(IngestError::InvalidNpy(_))
    ));
    // Deep nesting (npyz's parser is recursive).
    let deep = format!("{}{}", "(".repeat(10_000), ")".repeat(10_000));
    let deep = npy_file(&deep, false, &[1, 1], &[0; 8]);
    assert!(matches!(
        run(&deep, Format::Npy),
        Err(IngestError::UnsupportedNpy(_))
    ));
}

#[test]
fn npy_declared_shape_is_checked_before_reading_data() {
    let header_only = |dims: &[u64]| npy_file("<f8", false, dims, &[]);
    assert!(matches!(
        run(&header_only(&[0, 3]), Format::Npy),
        Err(IngestError::Empty)
    ));
    assert!(matches!(
        run(&header_only(&[2, 101]), Format::Npy),
        Err(IngestError::TooManyColumns { d: 101, max: 100 })
    ));
    assert!(matches!(
        run(&header_only(&[1001, 2]), Format::Npy),
        Err(IngestError::TooManyRows { max: 1000 })
    ));
    // 1000 × 100 f64 = 800 kB fits the row and column limits but not 100 kB.
    let small = Limits {
        max_bytes: 100_000,
        ..LIMITS
    };
    let err = run_with(&header_only(&[1000, 100]), Format::Npy, RAW, small).expect_err("too large");
    assert!(
        matches!(err, IngestError::TooLarge { max_bytes: 100_000 }),
        "{err:?}"
    );
    let sym = run_with(&header_only(&[2, 3]), Format::Npy, Shape::SymmetricMatrix, LIMITS);
    assert!(
        matches!(sym, Err(IngestError::NotSquare { rows: 2, cols: 3 })),
        "{sym:?}"
    );
}

#[test]
fn npy_non_finite_values_are_refused_with_position() {
    let file = npy64(&[vec![1.0, 2.0], vec![3.0, f64::NAN]]);
    assert!(matches!(
        run(&file, Format::Npy),
        Err(IngestError::NonFinite { row: 2, col: 2 })
    ));
    let file = npy_file("<f4", false, &[1, 2], &[0, 0, 0, 0, 0, 0, 0x80, 0x7f]); // f32 +inf
    assert!(matches!(
        run(&file, Format::Npy),
        Err(IngestError::NonFinite { row: 1, col: 2 })
    ));
}
