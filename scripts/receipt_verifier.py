#!/usr/bin/env python3
"""An independent verifier of privpca ledger receipts and consistency proofs.

Written from the specifications only, with nothing but the Python 3.11 standard library, so
that a receipt can be checked without trusting the service's own code:

- Ed25519 verification: RFC 8032 section 5.1.7 (point decoding 5.1.3, addition 5.1.4), after
  the reference code of section 6;
- the Merkle tree: RFC 6962 section 2.1 (leaf hash SHA-256(0x00 || leaf), node hash
  SHA-256(0x01 || left || right)); inclusion proofs checked as RFC 9162 section 2.1.3.2 does,
  consistency proofs as RFC 9162 section 2.1.4.2 does;
- signed notes: C2SP signed-note (text, blank line, "— <name> <base64(key ID || signature)>"
  lines; key ID = SHA-256(name || 0x0A || 0x01 || public key)[:4]); verifier keys
  "<name>+<8 hex key ID>+<base64(0x01 || public key)>" as golang.org/x/mod/sumdb/note writes them;
- checkpoints: C2SP tlog-checkpoint (origin line, decimal tree size, base64 root hash, optional
  extension lines).

Usage:
  receipt_verifier.py receipt --key VKEY [--origin ORIGIN] RECEIPT.json
  receipt_verifier.py consistency --key VKEY [--origin ORIGIN] OLD_CHECKPOINT NEW_CHECKPOINT PROOF.json
  receipt_verifier.py selftest

RECEIPT.json is {"leaf", "leaf_index", "inclusion_proof", "checkpoint"} (docs/design/ledger.md,
"The transparency log"); a checkpoint file holds a signed note; PROOF.json is {"proof": [...]}.
VKEY is the verifier key string, or a file that holds it. Exit status 0: valid; 1: not valid (the
reason on stderr); 2: bad usage.
"""

import argparse
import base64
import binascii
import hashlib
import json
import os
import sys


class Invalid(Exception):
    """The receipt, note, key or proof does not verify; the message says why."""


# ---------------------------------------------------------------------------------------------
# Ed25519 verification (RFC 8032 section 5.1).

P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493
D = -121665 * pow(121666, P - 2, P) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)
# The base point B (RFC 8032 section 5.1), in extended coordinates (X, Y, Z, T), x*y = T/Z.
B_X = 15112221349535400772501151409588531511454012693041857206046113283949847762202
B_Y = 46316835694926478169428394003475163141307993866256225615783033603165251855960
B = (B_X, B_Y, 1, B_X * B_Y % P)
IDENTITY = (0, 1, 1, 0)


def point_add(p, q):
    """Addition on edwards25519 in extended coordinates (RFC 8032 section 5.1.4)."""
    a = (p[1] - p[0]) * (q[1] - q[0]) % P
    b = (p[1] + p[0]) * (q[1] + q[0]) % P
    c = 2 * p[3] * q[3] * D % P
    d = 2 * p[2] * q[2] % P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def point_mul(s, p):
    """[s]P by double-and-add (verification handles public values only)."""
    q = IDENTITY
    while s > 0:
        if s & 1:
            q = point_add(q, p)
        p = point_add(p, p)
        s >>= 1
    return q


def point_equal(p, q):
    """Projective equality: X1/Z1 = X2/Z2 and Y1/Z1 = Y2/Z2."""
    return (p[0] * q[2] - q[0] * p[2]) % P == 0 and (p[1] * q[2] - q[1] * p[2]) % P == 0


def recover_x(y, sign):
    """The x of a point with this y and x's low bit, or None (RFC 8032 section 5.1.3, 2-4)."""
    if y >= P:
        return None
    x2 = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P != 0:
        x = x * SQRT_M1 % P
    if (x * x - x2) % P != 0:
        return None
    if (x & 1) != sign:
        x = P - x
    return x


def point_decompress(data):
    """Decodes a 32-byte point (RFC 8032 section 5.1.3), or None if it is not one."""
    if len(data) != 32:
        return None
    y = int.from_bytes(data, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = recover_x(y, sign)
    if x is None:
        return None
    return (x, y, 1, x * y % P)


def ed25519_verify(public, message, signature):
    """RFC 8032 section 5.1.7: [S]B = R + [k]A', k = SHA-512(R || A || M) mod L."""
    if len(public) != 32 or len(signature) != 64:
        return False
    a = point_decompress(public)
    r = point_decompress(signature[:32])
    if a is None or r is None:
        return False
    s = int.from_bytes(signature[32:], "little")
    if s >= L:
        return False
    k = int.from_bytes(hashlib.sha512(signature[:32] + public + message).digest(), "little") % L
    return point_equal(point_mul(s, B), point_add(r, point_mul(k, a)))


# ---------------------------------------------------------------------------------------------
# The Merkle tree (RFC 6962 section 2.1) and its proofs (RFC 9162 sections 2.1.3.2, 2.1.4.2).

EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(leaf):
    return hashlib.sha256(b"\x00" + leaf).digest()


def node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def verify_inclusion(index, size, leaf_digest, proof, root):
    """RFC 9162 section 2.1.3.2."""
    if index >= size:
        raise Invalid(f"leaf index {index} is not below the tree size {size}")
    fn, sn, r = index, size - 1, leaf_digest
    for p in proof:
        if sn == 0:
            raise Invalid("the inclusion proof is too long")
        if fn & 1 == 1 or fn == sn:
            r = node_hash(p, r)
            if fn & 1 == 0:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise Invalid("the inclusion proof is too short")
    if r != root:
        raise Invalid("the inclusion proof does not lead to the checkpoint's root hash")


def verify_consistency(first, second, first_hash, second_hash, proof):
    """RFC 9162 section 2.1.4.2 for 0 < first < second; RFC 6962 section 2.1.2 has empty proofs
    for first = second (the same tree) and first = 0 (the empty tree is a prefix of any)."""
    if first > second:
        raise Invalid(f"the old tree size {first} is above the new one {second}")
    if first == second or first == 0:
        if proof:
            raise Invalid("the consistency proof should be empty")
        if first == second and first_hash != second_hash:
            raise Invalid("two checkpoints of the same size have different root hashes")
        if first == 0 and first_hash != EMPTY_ROOT:
            raise Invalid("an empty tree's root hash is not SHA-256 of nothing")
        return
    path = list(proof)
    if not path:  # step 1
        raise Invalid("the consistency proof is empty")
    if first & (first - 1) == 0:  # step 2: first is an exact power of 2
        path.insert(0, first_hash)
    fn, sn = first - 1, second - 1  # step 3
    while fn & 1 == 1:  # step 4
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]  # step 5
    for c in path[1:]:  # step 6
        if sn == 0:
            raise Invalid("the consistency proof is too long")
        if fn & 1 == 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if fn & 1 == 0:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:  # step 7
        raise Invalid("the consistency proof is too short")
    if fr != first_hash:
        raise Invalid("the consistency proof does not lead to the old checkpoint's root hash")
    if sr != second_hash:
        raise Invalid("the consistency proof does not lead to the new checkpoint's root hash")


# ---------------------------------------------------------------------------------------------
# Signed notes (C2SP signed-note) and checkpoints (C2SP tlog-checkpoint).

EM_DASH = "\u2014"


def b64decode(text, what):
    """Standard base64 with padding (RFC 4648 section 4); refuses anything else."""
    if not isinstance(text, str):
        raise Invalid(f"{what} is not a string")
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as e:
        raise Invalid(f"{what} is not standard base64 ({e})") from None
    if base64.b64encode(data).decode("ascii") != text:
        raise Invalid(f"{what} is not canonical base64")
    return data


def valid_name(name):
    return name != "" and "+" not in name and not any(c.isspace() for c in name)


def key_id(name, public):
    """SHA-256(key name || 0x0A || 0x01 || public key)[:4], big-endian (signed-note)."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + b"\x01" + public).digest()
    return int.from_bytes(digest[:4], "big")


def parse_verifier_key(vkey):
    """'<name>+<8 hex key ID>+<base64(0x01 || public key)>' -> (name, key ID, public key)."""
    parts = vkey.strip().split("+", 2)
    if len(parts) != 3:
        raise Invalid("the verifier key is not <name>+<key ID>+<key>")
    name, id_hex, key64 = parts
    if not valid_name(name):
        raise Invalid(f"the verifier key's name {name!r} is not valid")
    if len(id_hex) != 8 or any(c not in "0123456789abcdefABCDEF" for c in id_hex):
        raise Invalid("the verifier key's ID is not 8 hex digits")
    data = b64decode(key64, "the verifier key")
    if len(data) != 33 or data[0] != 0x01:
        raise Invalid("the verifier key is not an Ed25519 key (0x01 and 32 bytes)")
    public = data[1:]
    if key_id(name, public) != int(id_hex, 16):
        raise Invalid("the verifier key's ID does not match its name and key")
    return name, int(id_hex, 16), public


def open_note(note, vkey):
    """The text of a signed note if the key `vkey` signed it (C2SP signed-note)."""
    name, kid, public = vkey
    if any(ord(c) < 0x20 and c != "\n" for c in note):
        raise Invalid("the note contains a control character")
    split = note.rfind("\n\n")
    if split < 0:
        raise Invalid("the note has no blank line before its signatures")
    text, signatures = note[: split + 1], note[split + 2 :]
    if not signatures.endswith("\n"):
        raise Invalid("the note has no signature line, or one without its newline")
    lines = signatures[:-1].split("\n")
    if len(lines) > 100:
        raise Invalid("the note has too many signatures")
    verified = False
    for line in lines:
        if not line.startswith(EM_DASH + " "):
            raise Invalid("a signature line does not begin with an em dash")
        line_name, sep, sig64 = line[2:].partition(" ")
        if not sep or not valid_name(line_name):
            raise Invalid("a signature line is malformed")
        sig = b64decode(sig64, "a note signature")
        if len(sig) < 5:
            raise Invalid("a note signature is too short")
        if line_name != name or int.from_bytes(sig[:4], "big") != kid:
            continue  # another key's signature: ignored, as signed-note requires
        if not ed25519_verify(public, text.encode("utf-8"), sig[4:]):
            raise Invalid(f"the signature by {name}+{kid:08x} does not verify")
        verified = True
    if not verified:
        raise Invalid(f"the note carries no signature by {name}+{kid:08x}")
    return text


def parse_checkpoint(text):
    """(origin, size, root hash) of a checkpoint's note text (C2SP tlog-checkpoint)."""
    if not text.endswith("\n"):
        raise Invalid("the checkpoint does not end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise Invalid("the checkpoint has fewer than three lines")
    origin, size, root64 = lines[0], lines[1], lines[2]
    if origin == "":
        raise Invalid("the checkpoint's origin is empty")
    if not (size.isascii() and size.isdigit()) or (len(size) > 1 and size[0] == "0"):
        raise Invalid("the checkpoint's tree size is not a decimal number")
    if int(size) >= 2**64:
        raise Invalid("the checkpoint's tree size is too large")
    root = b64decode(root64, "the checkpoint's root hash")
    if len(root) != 32:
        raise Invalid("the checkpoint's root hash is not 32 bytes")
    if any(line == "" for line in lines[3:]):
        raise Invalid("the checkpoint has an empty extension line")
    return origin, int(size), root


def verified_checkpoint(note, vkey, origin=None):
    checkpoint = parse_checkpoint(open_note(note, vkey))
    if origin is not None and checkpoint[0] != origin:
        raise Invalid(f"the checkpoint is of the log {checkpoint[0]!r}, not {origin!r}")
    return checkpoint


# ---------------------------------------------------------------------------------------------
# Receipts and consistency between two checkpoints.


def hash_list(value, what):
    if not isinstance(value, list):
        raise Invalid(f"{what} is not a list")
    hashes = [b64decode(h, what) for h in value]
    if any(len(h) != 32 for h in hashes):
        raise Invalid(f"{what} holds a hash that is not 32 bytes")
    return hashes


def verify_receipt(receipt, vkey, origin=None):
    """Checks a receipt; returns (origin, size, leaf index, leaf bytes)."""
    if not isinstance(receipt, dict):
        raise Invalid("the receipt is not a JSON object")
    for field, kind in [("leaf", str), ("leaf_index", int), ("inclusion_proof", list), ("checkpoint", str)]:
        if not isinstance(receipt.get(field), kind) or isinstance(receipt.get(field), bool):
            raise Invalid(f"the receipt's {field} is missing or not a {kind.__name__}")
    log, size, root = verified_checkpoint(receipt["checkpoint"], vkey, origin)
    leaf = b64decode(receipt["leaf"], "the leaf")
    index = receipt["leaf_index"]
    if index < 0:
        raise Invalid("the leaf index is negative")
    proof = hash_list(receipt["inclusion_proof"], "the inclusion proof")
    verify_inclusion(index, size, leaf_hash(leaf), proof, root)
    return log, size, index, leaf


def check_consistency(old_note, new_note, proof_doc, vkey, origin=None):
    """Checks that the new checkpoint extends the old one; returns both (origin, size, root)."""
    old = verified_checkpoint(old_note, vkey, origin)
    new = verified_checkpoint(new_note, vkey, origin)
    if old[0] != new[0]:
        raise Invalid(f"the checkpoints are of different logs: {old[0]!r} and {new[0]!r}")
    if not isinstance(proof_doc, dict) or "proof" not in proof_doc:
        raise Invalid('the proof file is not {"proof": [...]}')
    proof = hash_list(proof_doc["proof"], "the consistency proof")
    verify_consistency(old[1], new[1], old[2], new[2], proof)
    return old, new


# ---------------------------------------------------------------------------------------------
# Known answers: RFC 8032 section 7.1 TEST 1, golang.org/x/mod/sumdb/note's example note, the
# Certificate Transparency test tree (roots at sizes 0-8, proofs).

GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_NOTE = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
    "\n"
    "\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)
CT_LEAVES = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"]
CT_ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]


def reference_root(hashes):
    """MTH by the recursive definition of RFC 6962 section 2.1."""
    if not hashes:
        return EMPTY_ROOT
    if len(hashes) == 1:
        return hashes[0]
    k = 1
    while 2 * k < len(hashes):
        k *= 2
    return node_hash(reference_root(hashes[:k]), reference_root(hashes[k:]))


def reference_path(m, hashes):
    """PATH(m, D[n]) of RFC 6962 section 2.1.1."""
    if len(hashes) <= 1:
        return []
    k = 1
    while 2 * k < len(hashes):
        k *= 2
    if m < k:
        return reference_path(m, hashes[:k]) + [reference_root(hashes[k:])]
    return reference_path(m - k, hashes[k:]) + [reference_root(hashes[:k])]


def reference_subproof(m, hashes, complete):
    """SUBPROOF(m, D[n], b) of RFC 6962 section 2.1.2."""
    n = len(hashes)
    if m == n:
        return [] if complete else [reference_root(hashes)]
    k = 1
    while 2 * k < n:
        k *= 2
    if m <= k:
        return reference_subproof(m, hashes[:k], complete) + [reference_root(hashes[k:])]
    return reference_subproof(m - k, hashes[k:], False) + [reference_root(hashes[:k])]


def selftest():
    checks = []

    def check(name, condition):
        checks.append((name, bool(condition)))

    def raises(f, *args):
        try:
            f(*args)
        except Invalid:
            return True
        return False

    pub = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    sig = bytes.fromhex(
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
    )
    check("base point on the curve", (B_Y * B_Y - B_X * B_X - 1 - D * B_X * B_X * B_Y * B_Y) % P == 0)
    check("base point y = 4/5", B_Y == 4 * pow(5, P - 2, P) % P)
    check("RFC 8032 TEST 1 verifies", ed25519_verify(pub, b"", sig))
    check("RFC 8032 TEST 1 with a message refused", not ed25519_verify(pub, b"x", sig))
    check("RFC 8032 TEST 1 with S + L refused", not ed25519_verify(pub, b"", sig[:32] + (int.from_bytes(sig[32:], "little") + L).to_bytes(32, "little")))
    vkey = parse_verifier_key(GO_VKEY)
    check("Go note key ID", vkey[1] == 0xC74F20A3)
    check("Go note verifies", open_note(GO_NOTE, vkey) == GO_NOTE[: GO_NOTE.index("\n\n") + 1])
    check("Go note with a changed text refused", raises(open_note, GO_NOTE.replace("problem,", "problem;"), vkey))
    check("Go note with a changed signature refused", raises(open_note, GO_NOTE.replace("x08go/ZJ", "x08go/ZK"), vkey))
    check("verifier key with a wrong ID refused", raises(parse_verifier_key, GO_VKEY.replace("c74f20a3", "c74f20a4")))
    hashes = [leaf_hash(bytes.fromhex(x)) for x in CT_LEAVES]
    check("CT roots at sizes 0-8", all(reference_root(hashes[:n]).hex() == CT_ROOTS[n] for n in range(9)))
    all_ok = True
    leaves = [leaf_hash(i.to_bytes(2, "big")) for i in range(20)]
    for n in range(1, 21):
        root = reference_root(leaves[:n])
        for m in range(n):
            verify_inclusion(m, n, leaves[m], reference_path(m, leaves[:n]), root)
            bad = reference_path(m, leaves[:n]) + [root]
            all_ok &= raises(verify_inclusion, m, n, leaves[m], bad, root)
        for m in range(0, n + 1):
            proof = reference_subproof(m, leaves[:n], True) if m > 0 else []
            verify_consistency(m, n, reference_root(leaves[:m]), root, proof)
            if 0 < m < n:
                wrong = bytes([proof[0][0] ^ 1]) + proof[0][1:]
                all_ok &= raises(verify_consistency, m, n, reference_root(leaves[:m]), root, [wrong] + proof[1:])
    check("every proof of trees up to 20 leaves, and their tampered copies", all_ok)
    cp = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    check("C2SP checkpoint example parses", parse_checkpoint(cp)[:2] == ("example.com/behind-the-sofa", 20852163))
    check("checkpoint with a leading zero refused", raises(parse_checkpoint, cp.replace("\n2085", "\n02085")))
    failed = [name for name, ok in checks if not ok]
    for name in failed:
        print(f"FAILED: {name}", file=sys.stderr)
    print(f"{len(checks) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------------
# Command line.


def read_text(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8")
    except UnicodeDecodeError:
        raise Invalid(f"{path} is not UTF-8") from None


def read_json(path):
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise Invalid(f"{path} is not JSON: {e}") from None


def verifier_key_arg(value):
    if "+" not in value and os.path.isfile(value):
        value = read_text(value)
    return parse_verifier_key(value)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    receipt = commands.add_parser("receipt", help="verify a receipt")
    receipt.add_argument("--key", required=True, help="the log's verifier key, or a file holding it")
    receipt.add_argument("--origin", help="the log the receipt must be of (checkpoint origin)")
    receipt.add_argument("receipt")
    consistency = commands.add_parser("consistency", help="verify that a checkpoint extends an older one")
    consistency.add_argument("--key", required=True, help="the log's verifier key, or a file holding it")
    consistency.add_argument("--origin", help="the log both checkpoints must be of")
    consistency.add_argument("old_checkpoint")
    consistency.add_argument("new_checkpoint")
    consistency.add_argument("proof")
    commands.add_parser("selftest", help="check the known answers of the specifications")
    args = parser.parse_args(argv)
    if args.command == "selftest":
        return selftest()
    try:
        vkey = verifier_key_arg(args.key)
        if args.command == "receipt":
            log, size, index, leaf = verify_receipt(read_json(args.receipt), vkey, args.origin)
            print(f"valid: leaf {index} of {log} at tree size {size}")
            print(leaf.decode("utf-8", errors="replace"))
        else:
            old, new = check_consistency(
                read_text(args.old_checkpoint), read_text(args.new_checkpoint), read_json(args.proof), vkey, args.origin
            )
            print(f"valid: {new[0]} at size {new[1]} extends size {old[1]}")
        return 0
    except (Invalid, OSError) as e:
        print(f"receipt_verifier: not valid: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
