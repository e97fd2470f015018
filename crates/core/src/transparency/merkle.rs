//! RFC 6962 Merkle hash trees over SHA-256: the tree hash, audit paths (inclusion proofs) and
//! consistency proofs, generated as RFC 6962 §2.1.1–2.1.2 define them and verified with the
//! iterative algorithms of RFC 9162 §2.1.3.2 and §2.1.4.2 (the same trees and proofs; RFC 9162
//! only restates them).
//!
//! Notation of RFC 6962 §2.1: D\[n\] = {d(0), …, d(n−1)} is the list of leaves, D\[a:b\] the leaves
//! a … b−1, and k the largest power of two strictly below n. Proof generation reads hashes of
//! subtrees D\[a:b\] through [`Subtrees`]; a slice of leaf hashes is one (the whole log loaded);
//! a store that keeps the hashes of complete subtrees can be another.

use sha2::{Digest, Sha256};

/// A SHA-256 output: a leaf hash, a node hash or a tree's root.
pub type Hash = [u8; 32];

/// MTH({}) = SHA-256() (RFC 6962 §2.1): the root of the empty tree.
pub const EMPTY_ROOT: Hash = [
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24, 0x27,
    0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
];

/// What a tree, a proof or a request for one can get wrong. Never a panic: every input that
/// reaches these functions may come from outside.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MerkleError {
    #[error("leaf index {index} is not below the tree size {size}")]
    IndexOutOfRange { index: u64, size: u64 },
    #[error("the first tree size {first} is above the second tree size {second}")]
    FirstAboveSecond { first: u64, second: u64 },
    #[error("the proof has {got} hashes where a tree of this shape needs {expected}")]
    ProofLength { expected: usize, got: usize },
    #[error("the proof does not lead to the root hash it is checked against")]
    RootMismatch,
    #[error("subtree D[{start}:{end}] is not within a tree of {size} leaves")]
    Range { start: u64, end: u64, size: u64 },
}

/// The leaf hash SHA-256(0x00 ‖ d) (RFC 6962 §2.1, MTH({d(0)})).
pub fn leaf_hash(leaf: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0x00]);
    h.update(leaf);
    h.finalize().into()
}

/// The interior node hash SHA-256(0x01 ‖ left ‖ right) (RFC 6962 §2.1).
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([0x01]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// k: the largest power of two strictly below `n`, for n ≥ 2 (RFC 6962 §2.1).
fn split_point(n: u64) -> u64 {
    debug_assert!(n >= 2);
    1 << (63 - (n - 1).leading_zeros())
}

/// MTH(D\[n\]) of the given leaf hashes (RFC 6962 §2.1): [`EMPTY_ROOT`] for none, the leaf hash
/// itself for one, else SHA-256(0x01 ‖ MTH(D\[0:k\]) ‖ MTH(D\[k:n\])).
pub fn root(leaf_hashes: &[Hash]) -> Hash {
    match leaf_hashes {
        [] => EMPTY_ROOT,
        [one] => *one,
        _ => {
            // `split_point(n) < n`, and a slice length fits in u64 and back.
            let k = split_point(leaf_hashes.len() as u64) as usize;
            node_hash(&root(&leaf_hashes[..k]), &root(&leaf_hashes[k..]))
        }
    }
}

/// Where proof generation reads MTH(D\[start:end\]) from. Every range asked for is a node of the
/// RFC 6962 §2.1 recursion: `start` is a multiple of 2^⌈log₂(end − start)⌉, and either
/// `end − start` is a power of two (a complete subtree, which never changes once written) or
/// `end` is the tree size (the right edge, hashed from complete subtrees). A store that keeps
/// complete subtrees' hashes can answer without reading every leaf.
pub trait Subtrees {
    /// The error of reading a hash; a range outside the tree is [`MerkleError::Range`].
    type Error: From<MerkleError>;
    /// The tree size n.
    fn size(&self) -> u64;
    /// MTH(D\[start:end\]), for 0 ≤ start < end ≤ n.
    fn subtree_root(&self, start: u64, end: u64) -> Result<Hash, Self::Error>;
}

/// The whole log as its leaf hashes, in order.
impl Subtrees for [Hash] {
    type Error = MerkleError;

    fn size(&self) -> u64 {
        self.len() as u64
    }

    fn subtree_root(&self, start: u64, end: u64) -> Result<Hash, MerkleError> {
        let range = MerkleError::Range {
            start,
            end,
            size: self.size(),
        };
        let (Ok(a), Ok(b)) = (usize::try_from(start), usize::try_from(end)) else {
            return Err(range);
        };
        match self.get(a..b) {
            Some(leaves) if a < b => Ok(root(leaves)),
            _ => Err(range),
        }
    }
}

/// PATH(m, D\[n\]) (RFC 6962 §2.1.1), the audit path of leaf `index` in the tree of all the
/// given leaf hashes, ordered from the leaf up. For the tree at an earlier size, pass the
/// prefix `&leaf_hashes[..size]`.
pub fn inclusion_proof(index: u64, leaf_hashes: &[Hash]) -> Result<Vec<Hash>, MerkleError> {
    inclusion_proof_from(leaf_hashes, index)
}

/// [`inclusion_proof`] reading subtree hashes from `tree`.
pub fn inclusion_proof_from<T: Subtrees + ?Sized>(tree: &T, index: u64) -> Result<Vec<Hash>, T::Error> {
    let size = tree.size();
    if index >= size {
        return Err(MerkleError::IndexOutOfRange { index, size }.into());
    }
    let mut proof = Vec::new();
    path(tree, index, 0, size, &mut proof)?;
    Ok(proof)
}

/// PATH(index − start, D\[start:end\]): for n = end − start > 1, the path in the half holding the
/// leaf, then the root of the other half (RFC 6962 §2.1.1).
fn path<T: Subtrees + ?Sized>(
    tree: &T,
    index: u64,
    start: u64,
    end: u64,
    out: &mut Vec<Hash>,
) -> Result<(), T::Error> {
    let n = end - start;
    if n <= 1 {
        return Ok(());
    }
    let k = split_point(n);
    if index - start < k {
        path(tree, index, start, start + k, out)?;
        out.push(tree.subtree_root(start + k, end)?);
    } else {
        path(tree, index, start + k, end, out)?;
        out.push(tree.subtree_root(start, start + k)?);
    }
    Ok(())
}

/// PROOF(m, D\[n\]) (RFC 6962 §2.1.2) from the tree of size `first` = m to the tree of all the
/// given leaf hashes. Empty when m = n; also empty when m = 0 (the empty tree is a prefix of
/// every tree: nothing to prove; RFC 6962 defines PROOF only for 0 < m).
pub fn consistency_proof(first: u64, leaf_hashes: &[Hash]) -> Result<Vec<Hash>, MerkleError> {
    consistency_proof_from(leaf_hashes, first)
}

/// [`consistency_proof`] reading subtree hashes from `tree`.
pub fn consistency_proof_from<T: Subtrees + ?Sized>(tree: &T, first: u64) -> Result<Vec<Hash>, T::Error> {
    let second = tree.size();
    if first > second {
        return Err(MerkleError::FirstAboveSecond { first, second }.into());
    }
    let mut proof = Vec::new();
    if first > 0 {
        subproof(tree, first, 0, second, true, &mut proof)?;
    }
    Ok(proof)
}

/// SUBPROOF(m, D\[start:end\], b) (RFC 6962 §2.1.2), m counted from `start`:
/// - m = n: nothing if b (the old root is known), else {MTH(D\[start:end\])};
/// - m ≤ k: SUBPROOF(m, D\[0:k\], b) : MTH(D\[k:n\]);
/// - m > k: SUBPROOF(m − k, D\[k:n\], false) : MTH(D\[0:k\]).
fn subproof<T: Subtrees + ?Sized>(
    tree: &T,
    m: u64,
    start: u64,
    end: u64,
    complete: bool,
    out: &mut Vec<Hash>,
) -> Result<(), T::Error> {
    let n = end - start;
    if m == n {
        if !complete {
            out.push(tree.subtree_root(start, end)?);
        }
        return Ok(());
    }
    let k = split_point(n);
    if m <= k {
        subproof(tree, m, start, start + k, complete, out)?;
        out.push(tree.subtree_root(start + k, end)?);
    } else {
        subproof(tree, m - k, start + k, end, false, out)?;
        out.push(tree.subtree_root(start, start + k)?);
    }
    Ok(())
}

/// One step of the RFC 9162 walk when the proof hash is on the left (LSB(fn) set, or fn = sn):
/// if LSB(fn) is not set, right-shift fn and sn until LSB(fn) is set or fn is 0. The caller
/// then right-shifts both once more.
fn climb_right_edge(fn_: &mut u64, sn: &mut u64) {
    if *fn_ & 1 == 0 {
        while *fn_ & 1 == 0 && *fn_ != 0 {
            *fn_ >>= 1;
            *sn >>= 1;
        }
    }
}

/// How many hashes the RFC 9162 walk starting at (fn, sn) consumes before sn reaches 0: the
/// length of a valid proof. The walk of §2.1.3.2 (and of §2.1.4.2 after its step 4) fails on a
/// proof that is longer (sn = 0 with hashes left) or shorter (sn ≠ 0 at the end).
fn walk_length(mut fn_: u64, mut sn: u64) -> usize {
    let mut steps = 0;
    while sn != 0 {
        if fn_ & 1 == 1 || fn_ == sn {
            climb_right_edge(&mut fn_, &mut sn);
        }
        fn_ >>= 1;
        sn >>= 1;
        steps += 1;
    }
    steps
}

/// The number of hashes in the audit path of leaf `index` in a tree of `size` leaves.
pub fn inclusion_proof_len(index: u64, size: u64) -> Result<usize, MerkleError> {
    if index >= size {
        return Err(MerkleError::IndexOutOfRange { index, size });
    }
    Ok(walk_length(index, size - 1))
}

/// The root that an audit path leads to (RFC 9162 §2.1.3.2, steps 1–4): start from the leaf
/// hash with fn = index and sn = size − 1; each proof hash p goes on the left,
/// r = HASH(0x01 ‖ p ‖ r), when LSB(fn) is set or fn = sn, and on the right otherwise.
pub fn root_from_inclusion_proof(
    index: u64,
    size: u64,
    leaf_hash: &Hash,
    proof: &[Hash],
) -> Result<Hash, MerkleError> {
    let expected = inclusion_proof_len(index, size)?;
    if proof.len() != expected {
        return Err(MerkleError::ProofLength {
            expected,
            got: proof.len(),
        });
    }
    let (mut fn_, mut sn, mut r) = (index, size - 1, *leaf_hash);
    for p in proof {
        if sn == 0 {
            return Err(MerkleError::ProofLength {
                expected,
                got: proof.len(),
            });
        }
        if fn_ & 1 == 1 || fn_ == sn {
            r = node_hash(p, &r);
            climb_right_edge(&mut fn_, &mut sn);
        } else {
            r = node_hash(&r, p);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    Ok(r)
}

/// Checks that `proof` is the audit path of the leaf with hash `leaf_hash` at `index` in the
/// tree of `size` leaves whose root is `root` (RFC 9162 §2.1.3.2, step 5: sn = 0 and r = root).
pub fn verify_inclusion(
    index: u64,
    size: u64,
    leaf_hash: &Hash,
    proof: &[Hash],
    root: &Hash,
) -> Result<(), MerkleError> {
    if root_from_inclusion_proof(index, size, leaf_hash, proof)? == *root {
        Ok(())
    } else {
        Err(MerkleError::RootMismatch)
    }
}

/// The number of hashes in the consistency proof from size `first` to size `second`.
pub fn consistency_proof_len(first: u64, second: u64) -> Result<usize, MerkleError> {
    if first > second {
        return Err(MerkleError::FirstAboveSecond { first, second });
    }
    if first == 0 || first == second {
        return Ok(0);
    }
    // RFC 9162 §2.1.4.2 steps 2–4: the first tree's root is prepended (not sent) when first is
    // a power of two; the walk starts from fn = first − 1 with its trailing ones shifted away.
    let sent_seed = usize::from(!first.is_power_of_two());
    let shift = (first - 1).trailing_ones();
    Ok(sent_seed + walk_length((first - 1) >> shift, (second - 1) >> shift))
}

/// Checks that the tree of size `second` with root `second_root` extends the tree of size
/// `first` with root `first_root`, given PROOF(first, D\[second\]).
///
/// For 0 < first < second this is RFC 9162 §2.1.4.2. The two cases it leaves out are decided
/// as RFC 6962 §2.1.2 generates them: first = second needs an empty proof and equal roots;
/// first = 0 needs an empty proof and the empty tree's root as `first_root`.
pub fn verify_consistency(
    first: u64,
    second: u64,
    first_root: &Hash,
    second_root: &Hash,
    proof: &[Hash],
) -> Result<(), MerkleError> {
    let expected = consistency_proof_len(first, second)?;
    if proof.len() != expected {
        return Err(MerkleError::ProofLength {
            expected,
            got: proof.len(),
        });
    }
    let matches = if first == second {
        first_root == second_root
    } else if first == 0 {
        *first_root == EMPTY_ROOT
    } else {
        let (fr, sr) = consistency_roots(first, second, first_root, proof)?;
        fr == *first_root && sr == *second_root
    };
    if matches {
        Ok(())
    } else {
        Err(MerkleError::RootMismatch)
    }
}

/// RFC 9162 §2.1.4.2 steps 2–6 for 0 < first < second: the (first, second) roots the proof leads
/// to (fr, sr), to be compared with the known roots (step 7). The proof's length is checked.
fn consistency_roots(
    first: u64,
    second: u64,
    first_root: &Hash,
    proof: &[Hash],
) -> Result<(Hash, Hash), MerkleError> {
    let bad_length = MerkleError::ProofLength {
        expected: consistency_proof_len(first, second)?,
        got: proof.len(),
    };
    // Step 2: if first is an exact power of 2, prepend first_hash to the path.
    let mut path: Vec<&Hash> = Vec::with_capacity(proof.len() + 1);
    if first.is_power_of_two() {
        path.push(first_root);
    }
    path.extend(proof);
    // Steps 3–4: fn = first − 1, sn = second − 1; shift both while LSB(fn) is set.
    let (mut fn_, mut sn) = (first - 1, second - 1);
    while fn_ & 1 == 1 {
        fn_ >>= 1;
        sn >>= 1;
    }
    // Step 5: fr and sr start at the first value of the path (step 1: it must not be empty).
    let Some((&seed, rest)) = path.split_first() else {
        return Err(bad_length);
    };
    let (mut fr, mut sr) = (*seed, *seed);
    // Step 6.
    for c in rest {
        if sn == 0 {
            return Err(bad_length);
        }
        if fn_ & 1 == 1 || fn_ == sn {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            climb_right_edge(&mut fn_, &mut sn);
        } else {
            sr = node_hash(&sr, c);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    if sn != 0 {
        return Err(bad_length);
    }
    Ok((fr, sr))
}

#[cfg(test)]
#[path = "merkle_tests.rs"]
mod tests;
