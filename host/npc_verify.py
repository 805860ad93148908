"""Model verification for the host agent: sha256 of the bytes, ECDSA-P256 signature of the manifest.

Uses `cryptography` when it is importable, else the portable `p256` verifier shipped beside the agent.
Runs without the bench package (deployed as a flat folder).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json

try:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
except ImportError:  # a target without cryptography: fall back to the portable verifier
    ec = None


class Refused(Exception):
    """A model failed a check; `kind` is the fault kind (hash, signature, parse, oom)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


def canonical_bytes(manifest: dict) -> bytes:
    """The bytes a signature covers: the manifest without `sig`, keys sorted, compact separators."""
    body = {k: v for k, v in manifest.items() if k != "sig"}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")


def public_key_xy(pem: bytes) -> bytes:
    """The 64-byte X||Y of a P-256 SubjectPublicKeyInfo PEM (uncompressed point at its end)."""
    lines = [ln.strip() for ln in pem.decode("ascii").splitlines()]
    body = "".join(ln for ln in lines if ln and not ln.startswith("-----"))
    der = base64.b64decode(body)
    if len(der) != 91 or der[-65] != 4:
        raise ValueError("not an uncompressed P-256 public key")
    return der[-64:]


class Verifier:
    """Checks model bytes against a manifest signed by the trusted key."""

    def __init__(self, pubkey_pem: bytes, use_cryptography: bool = True) -> None:
        self.xy = public_key_xy(pubkey_pem)
        self._key = None
        if ec is not None and use_cryptography:
            self._key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b"\x04" + self.xy)
        self.name = "cryptography" if self._key is not None else "p256"

    def check(self, data: bytes, manifest: dict) -> None:
        """Raise Refused (kind `hash` or `signature`) unless `data` matches the signed `manifest`."""
        if not isinstance(manifest, dict):
            raise Refused("parse", "manifest is not an object")
        digest = hashlib.sha256(data).hexdigest()
        if manifest.get("sha256") != digest:
            raise Refused("hash", f"sha256 {digest} does not match the manifest's {manifest.get('sha256')}")
        if "size" in manifest and manifest["size"] != len(data):
            raise Refused("hash", f"size {len(data)} does not match the manifest's {manifest['size']}")
        sig = manifest.get("sig")
        if not isinstance(sig, str):
            raise Refused("signature", "manifest has no signature")
        if not self.signed(manifest):
            raise Refused("signature", "signature does not verify with the trusted key")

    def signed(self, manifest: dict) -> bool:
        """True when `manifest['sig']` is a valid signature of its canonical bytes by the trusted key."""
        try:
            der = base64.b64decode(manifest.get("sig", ""), validate=True)
        except (binascii.Error, ValueError, TypeError):
            return False
        return self._verify(canonical_bytes(manifest), der)

    def _verify(self, message: bytes, der: bytes) -> bool:
        if self._key is not None:
            try:
                self._key.verify(der, message, ec.ECDSA(hashes.SHA256()))
            except (InvalidSignature, ValueError):
                return False
            return True
        import p256  # the portable verifier, deployed beside the agent when cryptography is missing

        return bool(p256.verify(p256.public_key(self.xy), hashlib.sha256(message).digest(), der))
