// The littlefs filesystem in the flash's vfs partition (filesystem.c) and the `os`/`open` on it (modos.c).
#ifndef C6_FILESYSTEM_H
#define C6_FILESYSTEM_H
#include <stdbool.h>
#include "lfs.h"

extern lfs_t c6_lfs;
extern bool c6_lfs_mounted;
int c6_fs_mount(void);   // 0, or a littlefs error (negative errno)
int c6_fs_format(void);
uint32_t c6_fs_block_count(void);
#endif
