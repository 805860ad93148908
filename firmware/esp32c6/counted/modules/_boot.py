# Run at every boot (frozen, as the esp32 port's _boot.py): mount the flash's vfs partition at / as littlefs v2,
# formatting it first when it holds no filesystem (an erased or new flash), as the chip's first boot does.
import gc

import vfs
from _c6flash import Flash

bdev = Flash()
if bdev.ioctl(4, 0):  # a vfs partition is there (its block count)
    try:
        vfs.mount(vfs.VfsLfs2(bdev, readsize=512, progsize=512), "/")
    except OSError:
        vfs.VfsLfs2.mkfs(bdev, readsize=512, progsize=512)
        vfs.mount(vfs.VfsLfs2(bdev, readsize=512, progsize=512), "/")
del bdev
gc.collect()
