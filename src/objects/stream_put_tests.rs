use super::*;

#[test]
fn a_sent_part_gives_its_buffer_back_and_no_more_are_kept_than_can_be_out() {
    let spare = Spare::default();
    let first = spare.take();
    let address = first.as_ptr();
    let part = Bytes::from_owner(Part {
        bytes: first,
        spare: spare.clone(),
    });
    let retry = part.clone();
    drop(part);
    assert!(
        spare.0.lock().expect("lock").is_empty(),
        "a clone still holds the part"
    );
    drop(retry);
    let again = spare.take();
    assert_eq!(again.as_ptr(), address, "the same buffer, emptied");
    assert!(again.is_empty() && again.capacity() >= PART_BYTES);
    for _ in 0..Spare::KEPT + 5 {
        spare.give_back(Vec::with_capacity(8));
    }
    assert_eq!(spare.0.lock().expect("lock").len(), Spare::KEPT);
}
