use super::*;
use crate::linalg::testing::planted_partition;

fn stored(csr: &Csr, name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("sparse-csr-{}-{name}", std::process::id()));
    let mut bytes = Vec::new();
    write_csr(csr, &mut bytes).expect("in memory");
    std::fs::write(&path, &bytes).expect("temp file");
    path
}

#[test]
fn a_written_matrix_reads_back_identical() {
    for (n, seed) in [(1usize, 1u64), (7, 2), (300, 3)] {
        let csr = planted_partition(n, 3, 0.3, 0.05, seed);
        let path = stored(&csr, &format!("roundtrip-{n}"));
        let opened = open_csr(&path, n as u64, csr.values.len() as u64).expect("opens");
        let view = opened.view().expect("valid arrays");
        assert_eq!(
            view.parts(),
            (&csr.row_ptr[..], &csr.col_idx[..], &csr.values[..])
        );
        std::fs::remove_file(path).expect("cleanup");
    }
}

#[test]
fn a_file_that_disagrees_with_the_database_or_is_damaged_is_refused() {
    let csr = planted_partition(20, 2, 0.5, 0.1, 4);
    let nnz = csr.values.len() as u64;
    let path = stored(&csr, "damaged");
    assert!(open_csr(&path, 21, nnz).is_err(), "another n");
    assert!(open_csr(&path, 20, nnz + 1).is_err(), "another nnz");
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[0] = b'X';
    std::fs::write(&path, &bytes).expect("write");
    assert!(open_csr(&path, 20, nnz).is_err(), "bad magic");
    bytes[0] = MAGIC[0];
    // A column index out of range, past the header and the row pointers.
    let col_at = 24 + 8 * 21;
    bytes[col_at..col_at + 4].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(&path, &bytes).expect("write");
    let opened = open_csr(&path, 20, nnz).expect("header fits");
    assert_eq!(
        opened.view().expect_err("bad column").kind(),
        io::ErrorKind::InvalidData
    );
    std::fs::remove_file(path).expect("cleanup");
}
