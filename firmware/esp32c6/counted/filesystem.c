// The filesystem in the flash's vfs partition: littlefs v2 (as the esp32 port puts there) on blockdev.c.
// An erased or unformatted partition is formatted at boot, as the esp32 port does at first boot.
#include <string.h>

#include "blockdev.h"
#include "filesystem.h"

#define CACHE_SIZE (512)
#define LOOKAHEAD_SIZE (32)

lfs_t c6_lfs;
bool c6_lfs_mounted;
static uint8_t read_buf[CACHE_SIZE], prog_buf[CACHE_SIZE];
static uint8_t lookahead_buf[LOOKAHEAD_SIZE] __attribute__((aligned(4)));
static uint8_t erased[BLOCKDEV_SECTOR_SIZE];

static uint32_t sector_of(lfs_block_t block, lfs_off_t off) {
    return block * (BLOCKDEV_BLOCK_SIZE / BLOCKDEV_SECTOR_SIZE) + off / BLOCKDEV_SECTOR_SIZE;
}

static int bd_read(const struct lfs_config *c, lfs_block_t block, lfs_off_t off, void *buffer, lfs_size_t size) {
    return blockdev_read(sector_of(block, off), buffer, size / BLOCKDEV_SECTOR_SIZE) ? LFS_ERR_IO : 0;
}

static int bd_prog(const struct lfs_config *c, lfs_block_t block, lfs_off_t off, const void *buffer,
    lfs_size_t size) {
    return blockdev_write(sector_of(block, off), buffer, size / BLOCKDEV_SECTOR_SIZE) ? LFS_ERR_IO : 0;
}

// A NOR flash erase sets every bit of the 4 KB sector to 1.
static int bd_erase(const struct lfs_config *c, lfs_block_t block) {
    for (uint32_t s = 0; s < BLOCKDEV_BLOCK_SIZE / BLOCKDEV_SECTOR_SIZE; s++) {
        if (blockdev_write(sector_of(block, 0) + s, erased, 1)) {
            return LFS_ERR_IO;
        }
    }
    return 0;
}

static int bd_sync(const struct lfs_config *c) {
    return 0;
}

static struct lfs_config cfg = {
    .read = bd_read,
    .prog = bd_prog,
    .erase = bd_erase,
    .sync = bd_sync,
    .read_size = BLOCKDEV_SECTOR_SIZE,
    .prog_size = BLOCKDEV_SECTOR_SIZE,
    .block_size = BLOCKDEV_BLOCK_SIZE,
    .block_cycles = 100,
    .cache_size = CACHE_SIZE,
    .lookahead_size = LOOKAHEAD_SIZE,
    .read_buffer = read_buf,
    .prog_buffer = prog_buf,
    .lookahead_buffer = lookahead_buf,
};

int c6_fs_mount(void) {
    if (c6_lfs_mounted) {
        return 0;
    }
    if (!blockdev_init()) {
        return LFS_ERR_NOENT; // the board gave no flash partition: no filesystem
    }
    memset(erased, 0xff, sizeof(erased));
    cfg.block_count = blockdev_blocks();
    int err = lfs_mount(&c6_lfs, &cfg);
    if (err) {
        err = lfs_format(&c6_lfs, &cfg);
        if (!err) {
            err = lfs_mount(&c6_lfs, &cfg);
        }
    }
    c6_lfs_mounted = err == 0;
    return err;
}

int c6_fs_format(void) {
    if (c6_lfs_mounted) {
        lfs_unmount(&c6_lfs);
        c6_lfs_mounted = false;
    }
    int err = lfs_format(&c6_lfs, &cfg);
    return err ? err : c6_fs_mount();
}

uint32_t c6_fs_block_count(void) {
    return cfg.block_count;
}
