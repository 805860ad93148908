// The vfs partition of the board's flash (virtio block device), in 4096-byte blocks.
#ifndef C6_BLOCKDEV_H
#define C6_BLOCKDEV_H
#include <stdbool.h>
#include <stdint.h>

#define BLOCKDEV_BLOCK_SIZE (4096)

#define BLOCKDEV_SECTOR_SIZE (512)

bool blockdev_init(void);            // false: the board gave no flash partition
uint32_t blockdev_blocks(void);
int blockdev_read(uint32_t sector, void *buf, uint32_t count);   // 512-byte sectors; 0 or -1
int blockdev_write(uint32_t sector, const void *buf, uint32_t count);
#endif
