"""Optional native kernel for npcnn: int8 fully connected accumulation with the viper emitter.

Imported by npcnn only if this port has the native emitter (unix, ESP32-C6 RISC-V); otherwise npcnn
runs its pure-Python loop. Same integer results either way. At most 4 arguments per function, the
portable limit for viper calls.
"""

import micropython


@micropython.viper
def fc_acc(w: ptr8, xs: ptr32, acc: ptr32, dims: int):
    """acc[o] += sum_i int8(w[o * n_in + i]) * xs[i] for o < n_out, with dims = n_in | n_out << 16
    (acc holds the biases on entry)."""
    n_in = dims & 0xFFFF
    n_out = dims >> 16
    j = 0
    for o in range(n_out):
        a = acc[o]
        for i in range(n_in):
            v = w[j]
            if v > 127:
                v -= 256
            a += v * xs[i]
            j += 1
        acc[o] = a


@micropython.viper
def copy32(dst: ptr32, src: ptr32, n: int):
    """dst[k] = src[k] for k < n."""
    for k in range(n):
        dst[k] = src[k]
