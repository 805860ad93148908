"""Model signing: ECDSA-P256 over SHA-256 of a manifest's canonical bytes (see docs/protocol.md)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from bench.core.errors import ConfigError
from bench.core.folders import write_file
from bench.core.inputs import read_input
from bench.core.paths import KEYS_DIR

DEV_PRIVATE_KEY = KEYS_DIR / "dev-model-signing.key.pem"
DEV_PUBLIC_KEY = KEYS_DIR / "dev-model-signing.pub.pem"


def canonical_bytes(manifest: dict[str, Any]) -> bytes:
    """The bytes a signature covers: the manifest without `sig`, keys sorted, compact separators."""
    body = {k: v for k, v in manifest.items() if k != "sig"}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")


def generate_key() -> ec.EllipticCurvePrivateKey:
    """A new P-256 private key."""
    return ec.generate_private_key(ec.SECP256R1())


def save_key_pair(key: ec.EllipticCurvePrivateKey, private_path: Path, public_path: Path) -> None:
    """Write the private key (PKCS#8 PEM, created mode 0600) and its public key (SubjectPublicKeyInfo PEM),
    each into a new file renamed into place: never through a symbolic link, never readable by others."""
    write_file(
        private_path,
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        mode=0o600,
    )
    write_file(
        public_path,
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
    )


def load_private_key(path: Path) -> ec.EllipticCurvePrivateKey:
    """A P-256 private key from a PEM file, or a ConfigError naming the file."""
    try:
        key = serialization.load_pem_private_key(read_input(path, "key"), password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"signing key {path}: cannot load: {exc}", hint="make one with `hilbench keys gen`") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise ConfigError(f"signing key {path}: not an ECDSA P-256 key")
    return key


def load_public_key(path: Path) -> ec.EllipticCurvePublicKey:
    """A P-256 public key from a PEM file, or a ConfigError naming the file."""
    try:
        key = serialization.load_pem_public_key(read_input(path, "key"))
    except ValueError as exc:
        raise ConfigError(f"public key {path}: cannot load: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise ConfigError(f"public key {path}: not an ECDSA P-256 key")
    return key


def public_key_raw(key: ec.EllipticCurvePublicKey) -> bytes:
    """The 64-byte X||Y form the MicroPython agent stores as its trusted key."""
    return key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)[1:]


def sign_manifest(manifest: dict[str, Any], key: ec.EllipticCurvePrivateKey) -> dict[str, Any]:
    """A copy of `manifest` with `sig`: base64 DER ECDSA-P256/SHA-256 over its canonical bytes."""
    # RFC 6979 deterministic nonces: the same manifest always gets the same signature, so a regenerated
    # bundle is byte-identical and deploys can skip files that are already on the device.
    sig = key.sign(canonical_bytes(manifest), ec.ECDSA(hashes.SHA256(), deterministic_signing=True))
    return {**manifest, "sig": base64.b64encode(sig).decode("ascii")}


def verify_manifest(manifest: dict[str, Any], key: ec.EllipticCurvePublicKey) -> bool:
    """True when `manifest['sig']` is a valid signature by `key`."""
    try:
        sig = base64.b64decode(manifest.get("sig", ""), validate=True)
        key.verify(sig, canonical_bytes(manifest), ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        return False
    return True


def model_manifest(path: Path, name: str, version: int, fmt: str) -> dict[str, Any]:
    """An unsigned manifest for the model file at `path`."""
    data = read_input(path, "model")
    return {
        "name": name,
        "version": version,
        "sha256": hashlib.sha256(data).hexdigest(),
        "size": len(data),
        "format": fmt,
    }
