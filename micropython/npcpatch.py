"""Apply a bsdiff4-zlib patch (bench/ota/delta.py) for MicroPython, streaming from flash to flash.

old file + patch file -> new file with a few hundred bytes of buffers and a 1 KB inflate window: the
control block is read 24 bytes at a time, the diff block inflated with `deflate` as it is needed, the
extra block copied in chunks. Raises ValueError on a damaged or inconsistent patch (nothing is switched:
the caller still checks the new file's sha256 against the signed manifest).
"""

import deflate

MAGIC = b"BSDIFFZ1"
CHUNK = 256


def _int64(b):
    """A BSDIFF40 integer: 8 bytes little-endian, sign in the top bit."""
    value = 0
    for i in range(7, -1, -1):
        value = (value << 8) | (b[i] & (0x7F if i == 7 else 0xFF))
    return -value if b[7] & 0x80 else value


def _read_exact(f, n, what):
    data = f.read(n)
    if data is None or len(data) != n:
        raise ValueError("patch: %s block ends early" % what)
    return data


def apply(old_path, patch_path, new_path):
    """Write `new_path` from `old_path` and the patch at `patch_path`; returns the new size."""
    with open(patch_path, "rb") as p:
        head = p.read(32)
    if len(head) != 32 or head[:8] != MAGIC:
        raise ValueError("patch: not a bsdiff4-zlib patch")
    ctrl_len, diff_len, new_size = _int64(head[8:16]), _int64(head[16:24]), _int64(head[24:32])
    if ctrl_len < 0 or diff_len < 0 or new_size < 0 or ctrl_len % 24:
        raise ValueError("patch: header lengths are out of range")
    with open(patch_path, "rb") as ctrl, open(patch_path, "rb") as diff_raw, open(patch_path, "rb") as extra:
        ctrl.seek(32)
        diff_raw.seek(32 + ctrl_len)
        extra.seek(32 + ctrl_len + diff_len)
        diff = deflate.DeflateIO(diff_raw, deflate.ZLIB, 10)
        with open(old_path, "rb") as old, open(new_path, "wb") as new:
            written = _run(ctrl, ctrl_len // 24, diff, extra, old, new, new_size)
    if written != new_size:
        raise ValueError("patch: produced %d bytes, the header says %d" % (written, new_size))
    return written


def _run(ctrl, steps, diff, extra, old, new, new_size):
    """Follow the control triples: add diff to old bytes, copy extra bytes, seek in old. Returns bytes written."""
    written = 0
    old_pos = 0
    for _ in range(steps):
        t = _read_exact(ctrl, 24, "control")
        add, copy, seek = _int64(t[0:8]), _int64(t[8:16]), _int64(t[16:24])
        if add < 0 or copy < 0 or written + add + copy > new_size:
            raise ValueError("patch: control block is inconsistent")
        done = 0
        while done < add:
            k = min(CHUNK, add - done)
            out = bytearray(_read_exact(diff, k, "diff"))
            start = old_pos + done
            lo = max(start, 0)  # old bytes outside the old file count as zero
            if lo < start + k:
                old.seek(lo)
                ob = old.read(start + k - lo)
                base = lo - start
                for i in range(len(ob)):
                    out[base + i] = (out[base + i] + ob[i]) & 0xFF
            new.write(out)
            done += k
        done = 0
        while done < copy:
            k = min(CHUNK, copy - done)
            new.write(_read_exact(extra, k, "extra"))
            done += k
        written += add + copy
        old_pos += add + seek
    return written
