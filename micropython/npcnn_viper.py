"""Optional native kernel for npcnn: int8 fully connected accumulation with the viper emitter.

Imported by npcnn only if this port has the native emitter (unix, ESP32-C6 RISC-V); otherwise npcnn
runs its pure-Python loop. Same integer results either way.
"""

import micropython


@micropython.viper
def fc_acc(w: ptr8, xs: ptr32, acc: ptr32, bias: ptr32, dims: int):
    """acc[o] = bias[o] + sum_i int8(w[o * n_in + i]) * xs[i], with dims = n_in | n_out << 16."""
    n_in = dims & 0xFFFF
    n_out = dims >> 16
    j = 0
    for o in range(n_out):
        a = bias[o]
        for i in range(n_in):
            v = w[j]
            if v > 127:
                v -= 256
            a += v * xs[i]
            j += 1
        acc[o] = a
