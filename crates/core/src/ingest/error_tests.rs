use super::*;

#[test]
fn only_output_and_bounds_failures_are_server_errors() {
    let server = [
        IngestError::Io(io::Error::other("disk full")),
        IngestError::InvalidBounds("beta"),
    ];
    assert!(server.iter().all(|e| !e.is_client_error()));
    let client = [
        IngestError::Read(io::Error::other("reset")),
        IngestError::Empty,
        IngestError::TooLarge { max_bytes: 1 },
        IngestError::Malformed {
            line: 1,
            message: "x".into(),
        },
    ];
    assert!(client.iter().all(IngestError::is_client_error));
}
