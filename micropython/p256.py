"""ECDSA-P256 signature verification in pure MicroPython (also runs on CPython).

Jacobian coordinates (a = -3), Shamir's trick for u1*G + u2*Q, strict DER signature parsing.
Verification only: no secret data is handled, so constant time does not matter.
"""

P = 0xFFFFFFFF00000001000000000000000000000000FFFFFFFFFFFFFFFFFFFFFFFF
N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
B = 0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B
GX = 0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296
GY = 0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5
_INF = (0, 1, 0)


def _inv(a, m):
    """Modular inverse by the extended Euclidean algorithm (a != 0 mod m)."""
    lm, hm = 1, 0
    low, high = a % m, m
    while low > 1:
        r = high // low
        lm, hm = hm - lm * r, lm
        low, high = high - low * r, low
    return lm % m


def on_curve(x, y):
    """True when (x, y) is a point of P-256 (not the point at infinity)."""
    if not (0 <= x < P and 0 <= y < P):
        return False
    return (y * y - (x * x * x - 3 * x + B)) % P == 0


def _double(pt):
    x, y, z = pt
    if z == 0 or y == 0:
        return _INF
    delta = z * z % P
    gamma = y * y % P
    beta = x * gamma % P
    alpha = 3 * (x - delta) * (x + delta) % P
    x3 = (alpha * alpha - 8 * beta) % P
    z3 = ((y + z) * (y + z) - gamma - delta) % P
    y3 = (alpha * (4 * beta - x3) - 8 * gamma * gamma) % P
    return (x3, y3, z3)


def _add(p1, p2):
    x1, y1, z1 = p1
    x2, y2, z2 = p2
    if z1 == 0:
        return p2
    if z2 == 0:
        return p1
    z1z1 = z1 * z1 % P
    z2z2 = z2 * z2 % P
    u1 = x1 * z2z2 % P
    u2 = x2 * z1z1 % P
    s1 = y1 * z2 * z2z2 % P
    s2 = y2 * z1 * z1z1 % P
    h = (u2 - u1) % P
    r = 2 * (s2 - s1) % P
    if h == 0:
        return _double(p1) if r == 0 else _INF
    i = 4 * h * h % P
    j = h * i % P
    v = u1 * i % P
    x3 = (r * r - j - 2 * v) % P
    y3 = (r * (v - x3) - 2 * s1 * j) % P
    z3 = ((z1 + z2) * (z1 + z2) - z1z1 - z2z2) * h % P
    return (x3, y3, z3)


def _shamir(u1, u2, q):
    """u1*G + u2*Q in Jacobian coordinates."""
    g = (GX, GY, 1)
    table = (None, g, q, _add(g, q))
    acc = _INF
    for bit in range(max(_bitlen(u1), _bitlen(u2)) - 1, -1, -1):
        acc = _double(acc)
        k = ((u1 >> bit) & 1) | (((u2 >> bit) & 1) << 1)
        if k:
            acc = _add(acc, table[k])
    return acc


def _bitlen(v):
    n = 0
    while v:
        v >>= 1
        n += 1
    return n


def parse_der(sig):
    """(r, s) from a DER `SEQUENCE { INTEGER r, INTEGER s }`; ValueError if it is not strict DER."""
    if len(sig) < 8 or sig[0] != 0x30 or sig[1] & 0x80 or sig[1] + 2 != len(sig):
        raise ValueError("signature is not a DER sequence")
    pos = 2
    out = []
    for _ in range(2):
        if pos + 2 > len(sig) or sig[pos] != 0x02:
            raise ValueError("signature integer missing")
        n = sig[pos + 1]
        body = sig[pos + 2 : pos + 2 + n]
        if n == 0 or n > 33 or len(body) != n or body[0] & 0x80 or (n > 1 and body[0] == 0 and not body[1] & 0x80):
            raise ValueError("signature integer badly encoded")
        out.append(int.from_bytes(body, "big"))
        pos += 2 + n
    if pos != len(sig):
        raise ValueError("trailing bytes after the signature")
    return out[0], out[1]


def public_key(raw):
    """The (x, y) point of a 64-byte X||Y public key; ValueError if it is not on the curve."""
    if len(raw) != 64:
        raise ValueError("a P-256 public key is 64 bytes X||Y")
    x = int.from_bytes(raw[:32], "big")
    y = int.from_bytes(raw[32:], "big")
    if not on_curve(x, y):
        raise ValueError("public key is not a point of P-256")
    return x, y


def verify(key, digest, sig):
    """True when DER `sig` is a valid ECDSA signature of the 32-byte SHA-256 `digest` by `key` (x, y)."""
    try:
        r, s = parse_der(sig)
    except ValueError:
        return False
    if not (0 < r < N and 0 < s < N):
        return False
    e = int.from_bytes(digest, "big")
    w = _inv(s, N)
    x, _, z = _shamir(e * w % N, r * w % N, (key[0], key[1], 1))
    if z == 0:
        return False
    zz = _inv(z, P)
    return (x * zz * zz % P) % N == r
