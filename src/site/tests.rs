use super::*;

#[test]
fn exit_codes_follow_the_kind_of_failure() {
    assert_eq!(Failure::Study(String::new()).code(), 1);
    assert_eq!(Failure::Refused(String::new()).code(), 2);
    assert_eq!(Failure::Protocol(String::new()).code(), 3);
    assert_eq!(Failure::Network(String::new()).code(), 4);
    let unauthorized: Failure = http::HttpError::Unauthorized("bad token".into()).into();
    assert_eq!(unauthorized.code(), 2);
    let gave_up: Failure = http::HttpError::GaveUp {
        what: "GET /v1/site/task".into(),
        last: "connection refused".into(),
        elapsed: std::time::Duration::from_secs(300),
    }
    .into();
    assert_eq!(gave_up.code(), 4);
    let refused: Failure = http::HttpError::Protocol {
        status: Some(reqwest::StatusCode::CONFLICT),
        problem_type: None,
        message: "the study is no longer enrolling".into(),
    }
    .into();
    assert_eq!(refused.code(), 3);
    assert!(refused.to_string().contains("no longer enrolling"));
}
