"""micropython/p256.py and npcsig.py under CPython against `cryptography` and bench/models/signing.py."""

import hashlib

import npcsig
import p256
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from bench.models import model_file
from bench.models.signing import (
    DEV_PRIVATE_KEY,
    DEV_PUBLIC_KEY,
    canonical_bytes,
    load_private_key,
    load_public_key,
    model_manifest,
    public_key_raw,
    sign_manifest,
)


def raw_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return public_key_raw(key.public_key())


def test_verifies_cryptography_signatures_and_refuses_others():
    key, other = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    pub, other_pub = p256.public_key(raw_key(key)), p256.public_key(raw_key(other))
    for i in range(5):
        msg = b"model manifest %d" % i
        sig = key.sign(msg, ec.ECDSA(hashes.SHA256()))
        digest = hashlib.sha256(msg).digest()
        assert p256.verify(pub, digest, sig)
        assert not p256.verify(other_pub, digest, sig)
        assert not p256.verify(pub, hashlib.sha256(msg + b"!").digest(), sig)


def test_malformed_signatures_are_refused_not_raised():
    key = ec.generate_private_key(ec.SECP256R1())
    pub = p256.public_key(raw_key(key))
    digest = hashlib.sha256(b"x").digest()
    sig = key.sign(b"x", ec.ECDSA(hashes.SHA256()))
    for bad in (b"", b"\x30\x00", sig[:-1], sig + b"\0", b"\x31" + sig[1:], bytes(len(sig))):
        assert not p256.verify(pub, digest, bad)
    r, s = p256.parse_der(sig)
    zero_s = bytes([0x30, 6 + len(sig[4 : 4 + sig[3]]), 0x02, sig[3], *sig[4 : 4 + sig[3]], 0x02, 1, 0])
    assert not p256.verify(pub, digest, zero_s)
    assert 0 < r < p256.N and 0 < s < p256.N


def test_off_curve_key_is_refused():
    raw = bytearray(raw_key(ec.generate_private_key(ec.SECP256R1())))
    raw[-1] ^= 1
    with pytest.raises(ValueError, match="not a point"):
        p256.public_key(bytes(raw))


def test_canonical_bytes_match_bench_signing():
    manifests = [
        {"name": "npc-policy", "version": 3, "sha256": "ab" * 32, "size": 6376, "format": "npcm-int8", "sig": "x"},
        {"z": [1, None, True, {"b": 2, "a": -1}], "a": 'é\u2028\U0001f600"\\\n\x01'},
    ]
    for m in manifests:
        assert npcsig.canonical(m) == canonical_bytes(m)
    with pytest.raises(ValueError, match="float"):
        npcsig.canonical({"x": 1.5})


def test_manifest_signed_by_the_bench_verifies_with_the_dev_key(tmp_path):
    manifest = sign_manifest(
        model_manifest(model_file("npc-policy-int8", "npcm"), "npc-policy", 1, "npcm-int8"),
        load_private_key(DEV_PRIVATE_KEY),
    )
    (tmp_path / "trust.key").write_text(public_key_raw(load_public_key(DEV_PUBLIC_KEY)).hex() + "\n")
    key = npcsig.load_trusted_key(str(tmp_path / "trust.key"))
    assert npcsig.verify_manifest(manifest, key)
    assert not npcsig.verify_manifest({**manifest, "version": 2}, key)
    assert not npcsig.verify_manifest({**manifest, "sig": "not base64!"}, key)
    assert npcsig.file_sha256(str(model_file("npc-policy-int8", "npcm"))) == (manifest["sha256"], manifest["size"])


def test_short_trust_key_is_a_clear_error(tmp_path):
    (tmp_path / "trust.key").write_text("abcd")
    with pytest.raises(ValueError, match="128 hex"):
        npcsig.load_trusted_key(str(tmp_path / "trust.key"))
