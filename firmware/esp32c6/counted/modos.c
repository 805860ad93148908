// `os`, `open()` and imports on the littlefs filesystem of the flash's vfs partition (filesystem.c).
#include <string.h>

#include "py/builtin.h"
#include "py/lexer.h"
#include "py/mperrno.h"
#include "py/objstr.h"
#include "py/objtuple.h"
#include "py/reader.h"
#include "py/runtime.h"
#include "py/stream.h"
#include "genhdr/mpversion.h"
#include "filesystem.h"
#include "module.h"
#include "virt.h"

#define PATH_MAX_LEN (MICROPY_ALLOC_PATH_MAX)
#define MODE_DIR (0x4000)
#define MODE_FILE (0x8000)

static char cwd[PATH_MAX_LEN] = "/";

static void check(int err) {
    if (err < 0) {
        mp_raise_OSError(-err);
    }
}

static void need_fs(void) {
    if (!c6_lfs_mounted) {
        mp_raise_OSError(MP_ENODEV);
    }
}

// `path` made absolute and normalised ('.', '..', repeated '/') into `out`.
static const char *resolve(const char *path, char *out) {
    size_t n = 0;
    out[0] = 0;
    for (int pass = path[0] == '/' ? 1 : 0; pass < 2; pass++) {
        const char *p = pass == 0 ? cwd : path;
        while (*p) {
            while (*p == '/') {
                p++;
            }
            const char *end = p;
            while (*end && *end != '/') {
                end++;
            }
            size_t len = end - p;
            if (len == 0 || (len == 1 && p[0] == '.')) {
                // nothing
            } else if (len == 2 && p[0] == '.' && p[1] == '.') {
                while (n > 0 && out[n - 1] != '/') {
                    n--;
                }
                if (n > 0) {
                    n--;
                }
            } else {
                if (n + 1 + len >= PATH_MAX_LEN) {
                    mp_raise_OSError(MP_EINVAL);
                }
                out[n++] = '/';
                memcpy(out + n, p, len);
                n += len;
            }
            out[n] = 0;
            p = end;
        }
    }
    if (n == 0) {
        strcpy(out, "/");
    }
    return out;
}

static const char *arg_path(mp_obj_t path_in, char *buf) {
    return resolve(mp_obj_str_get_str(path_in), buf);
}

// ---- a filesystem object mounted with os.mount (what `mpremote mount` mounts), one at a time ----

static char mount_path[PATH_MAX_LEN]; // "": nothing mounted
MP_REGISTER_ROOT_POINTER(mp_obj_t c6_mounted_vfs);

// The mounted object when the absolute path `abs` lies under its mount point (`rel`: the path inside it);
// otherwise MP_OBJ_NULL, and the path is on the flash's filesystem (which must then be there).
static mp_obj_t mounted(const char *abs, const char **rel) {
    size_t n = strlen(mount_path);
    if (n && strncmp(abs, mount_path, n) == 0 && (abs[n] == 0 || abs[n] == '/')) {
        *rel = abs[n] ? abs + n : "/";
        return MP_STATE_PORT(c6_mounted_vfs);
    }
    need_fs();
    return MP_OBJ_NULL;
}

static mp_obj_t vfs_call(mp_obj_t vfs, qstr method, const char *rel, size_t n_more, const mp_obj_t *more) {
    mp_obj_t call[5];
    mp_load_method(vfs, method, call);
    call[2] = mp_obj_new_str(rel, strlen(rel));
    for (size_t i = 0; i < n_more; i++) {
        call[3 + i] = more[i];
    }
    return mp_call_method_n_kw(1 + n_more, 0, call);
}

// An os function of one path: the mounted object's `method` when the path lies under its mount point, else
// `on_flash` with the absolute path on the flash's filesystem.
static mp_obj_t path_call(mp_obj_t path_in, qstr method, mp_obj_t (*on_flash)(const char *path)) {
    char buf[PATH_MAX_LEN];
    const char *path = arg_path(path_in, buf), *rel;
    mp_obj_t vfs = mounted(path, &rel);
    if (vfs != MP_OBJ_NULL) {
        return vfs_call(vfs, method, rel, 0, NULL);
    }
    return on_flash(path);
}

// Whether the entry at `path` on the flash's filesystem is a directory; OSError when there is none.
static bool flash_is_dir(const char *path) {
    struct lfs_info info;
    check(lfs_stat(&c6_lfs, path, &info));
    return info.type == LFS_TYPE_DIR;
}

// ---- file objects ----

typedef struct {
    mp_obj_base_t base;
    lfs_file_t file;
    struct lfs_file_config cfg;
    uint8_t buffer[512];
    bool open;
} c6_file_t;

static const mp_obj_type_t c6_fileio_type;
static const mp_obj_type_t c6_textio_type;

// A littlefs result as a stream call's: `n` when it is not negative, else MP_STREAM_ERROR with `errcode` set.
static mp_uint_t stream_result(lfs_ssize_t n, int *errcode) {
    if (n < 0) {
        *errcode = -n;
        return MP_STREAM_ERROR;
    }
    return n;
}

// The stream's file; NULL, with `errcode` EBADF, once it is closed.
static c6_file_t *open_file(mp_obj_t self_in, int *errcode) {
    c6_file_t *self = MP_OBJ_TO_PTR(self_in);
    if (!self->open) {
        *errcode = MP_EBADF;
        return NULL;
    }
    return self;
}

static mp_uint_t file_read(mp_obj_t self_in, void *buf, mp_uint_t size, int *errcode) {
    c6_file_t *self = open_file(self_in, errcode);
    return self ? stream_result(lfs_file_read(&c6_lfs, &self->file, buf, size), errcode) : MP_STREAM_ERROR;
}

static mp_uint_t file_write(mp_obj_t self_in, const void *buf, mp_uint_t size, int *errcode) {
    c6_file_t *self = open_file(self_in, errcode);
    return self ? stream_result(lfs_file_write(&c6_lfs, &self->file, buf, size), errcode) : MP_STREAM_ERROR;
}

static mp_uint_t file_ioctl(mp_obj_t self_in, mp_uint_t request, uintptr_t arg, int *errcode) {
    c6_file_t *self = MP_OBJ_TO_PTR(self_in);
    if (request == MP_STREAM_CLOSE) {
        if (!self->open) {
            return 0;
        }
        self->open = false;
        return stream_result(lfs_file_close(&c6_lfs, &self->file), errcode);
    }
    if (open_file(self_in, errcode) == NULL) {
        return MP_STREAM_ERROR;
    }
    if (request == MP_STREAM_SEEK) {
        struct mp_stream_seek_t *s = (struct mp_stream_seek_t *)arg;
        lfs_soff_t pos = lfs_file_seek(&c6_lfs, &self->file, s->offset, s->whence);
        if (pos < 0) {
            return stream_result(pos, errcode);
        }
        s->offset = pos;
        return 0;
    }
    if (request == MP_STREAM_FLUSH) {
        return stream_result(lfs_file_sync(&c6_lfs, &self->file), errcode);
    }
    *errcode = MP_EINVAL;
    return MP_STREAM_ERROR;
}

static mp_obj_t file_del(mp_obj_t self_in) {
    int errcode;
    file_ioctl(self_in, MP_STREAM_CLOSE, 0, &errcode);
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_1(file_del_obj, file_del);

static void file_print(const mp_print_t *print, mp_obj_t self_in, mp_print_kind_t kind) {
    mp_printf(print, "<io.%s>", mp_obj_get_type_str(self_in));
}

static const mp_rom_map_elem_t file_locals_table[] = {
    C6_FUN(mp_stream, read),
    C6_FUN(mp_stream, readinto),
    C6_FUN(mp_stream_unbuffered, readline),
    C6_FUN(mp_stream_unbuffered, readlines),
    C6_FUN(mp_stream, write),
    C6_FUN(mp_stream, flush),
    C6_FUN(mp_stream, close),
    C6_FUN(mp_stream, seek),
    C6_FUN(mp_stream, tell),
    { MP_ROM_QSTR(MP_QSTR___del__), MP_ROM_PTR(&file_del_obj) },
    { MP_ROM_QSTR(MP_QSTR___enter__), MP_ROM_PTR(&mp_identity_obj) },
    C6_FUN(mp_stream, __exit__),
};
static MP_DEFINE_CONST_DICT(file_locals_dict, file_locals_table);

static const mp_stream_p_t fileio_stream_p = {
    .read = file_read,
    .write = file_write,
    .ioctl = file_ioctl,
};

static const mp_stream_p_t textio_stream_p = {
    .read = file_read,
    .write = file_write,
    .ioctl = file_ioctl,
    .is_text = true,
};

static MP_DEFINE_CONST_OBJ_TYPE(
    c6_fileio_type, MP_QSTR_FileIO, MP_TYPE_FLAG_ITER_IS_STREAM,
    print, file_print, protocol, &fileio_stream_p, locals_dict, &file_locals_dict);

static MP_DEFINE_CONST_OBJ_TYPE(
    c6_textio_type, MP_QSTR_TextIOWrapper, MP_TYPE_FLAG_ITER_IS_STREAM,
    print, file_print, protocol, &textio_stream_p, locals_dict, &file_locals_dict);

static mp_obj_t file_open(const char *path, const char *mode) {
    int flags = 0;
    const mp_obj_type_t *type = &c6_textio_type;
    for (const char *m = mode; *m; m++) {
        switch (*m) {
            case 'r':
                flags |= LFS_O_RDONLY;
                break;
            case 'w':
                flags |= LFS_O_WRONLY | LFS_O_CREAT | LFS_O_TRUNC;
                break;
            case 'x':
                flags |= LFS_O_WRONLY | LFS_O_CREAT | LFS_O_EXCL;
                break;
            case 'a':
                flags |= LFS_O_WRONLY | LFS_O_CREAT | LFS_O_APPEND;
                break;
            case '+':
                flags |= LFS_O_RDWR;
                break;
            case 'b':
                type = &c6_fileio_type;
                break;
            case 't':
                type = &c6_textio_type;
                break;
            default:
                mp_raise_ValueError(MP_ERROR_TEXT("invalid mode"));
        }
    }
    if ((flags & LFS_O_RDWR) == 0) {
        flags |= LFS_O_RDONLY;
    }
    c6_file_t *f = mp_obj_malloc_with_finaliser(c6_file_t, type);
    memset(&f->cfg, 0, sizeof(f->cfg));
    f->cfg.buffer = f->buffer;
    f->open = false;
    check(lfs_file_opencfg(&c6_lfs, &f->file, path, flags, &f->cfg));
    f->open = true;
    return MP_OBJ_FROM_PTR(f);
}

mp_obj_t mp_builtin_open(size_t n_args, const mp_obj_t *args, mp_map_t *kwargs) {
    enum { ARG_file, ARG_mode, ARG_buffering, ARG_encoding };
    static const mp_arg_t allowed[] = {
        { MP_QSTR_file, MP_ARG_OBJ | MP_ARG_REQUIRED, {.u_rom_obj = MP_ROM_NONE} },
        { MP_QSTR_mode, MP_ARG_OBJ, {.u_rom_obj = MP_ROM_QSTR(MP_QSTR_r)} },
        { MP_QSTR_buffering, MP_ARG_INT, {.u_int = -1} },
        { MP_QSTR_encoding, MP_ARG_OBJ | MP_ARG_KW_ONLY, {.u_rom_obj = MP_ROM_NONE} },
    };
    mp_arg_val_t a[MP_ARRAY_SIZE(allowed)];
    mp_arg_parse_all(n_args, args, kwargs, MP_ARRAY_SIZE(allowed), allowed, a);
    char buf[PATH_MAX_LEN];
    const char *path = arg_path(a[ARG_file].u_obj, buf), *rel;
    mp_obj_t vfs = mounted(path, &rel);
    if (vfs != MP_OBJ_NULL) {
        return vfs_call(vfs, MP_QSTR_open, rel, 1, &a[ARG_mode].u_obj);
    }
    return file_open(path, mp_obj_str_get_str(a[ARG_mode].u_obj));
}
MP_DEFINE_CONST_FUN_OBJ_KW(mp_builtin_open_obj, 1, mp_builtin_open);

// ---- imports from the filesystem ----

mp_import_stat_t mp_import_stat(const char *path) {
    char buf[PATH_MAX_LEN];
    if (strlen(path) >= PATH_MAX_LEN) {
        return MP_IMPORT_STAT_NO_EXIST;
    }
    const char *abs = resolve(path, buf);
    size_t n = strlen(mount_path);
    if (n && strncmp(abs, mount_path, n) == 0 && (abs[n] == 0 || abs[n] == '/')) {
        nlr_buf_t nlr;
        if (nlr_push(&nlr) == 0) {
            mp_obj_t st = vfs_call(MP_STATE_PORT(c6_mounted_vfs), MP_QSTR_stat, abs[n] ? abs + n : "/", 0, NULL);
            nlr_pop();
            mp_int_t mode = mp_obj_get_int(mp_obj_subscr(st, MP_OBJ_NEW_SMALL_INT(0), MP_OBJ_SENTINEL));
            return mode & MODE_DIR ? MP_IMPORT_STAT_DIR : MP_IMPORT_STAT_FILE;
        }
        return MP_IMPORT_STAT_NO_EXIST;
    }
    struct lfs_info info;
    if (!c6_lfs_mounted || lfs_stat(&c6_lfs, abs, &info) < 0) {
        return MP_IMPORT_STAT_NO_EXIST;
    }
    return info.type == LFS_TYPE_DIR ? MP_IMPORT_STAT_DIR : MP_IMPORT_STAT_FILE;
}

// The whole file, read into the heap (`len` set); raises OSError.
static char *read_whole(const char *name, size_t *len) {
    char buf[PATH_MAX_LEN];
    const char *abs = resolve(name, buf), *rel;
    mp_obj_t vfs = mounted(abs, &rel);
    if (vfs != MP_OBJ_NULL) {
        mp_obj_t mode = MP_OBJ_NEW_QSTR(MP_QSTR_rb);
        mp_obj_t f = vfs_call(vfs, MP_QSTR_open, rel, 1, &mode);
        mp_obj_t data = mp_call_function_0(mp_load_attr(f, MP_QSTR_read));
        mp_call_function_0(mp_load_attr(f, MP_QSTR_close));
        mp_buffer_info_t info;
        mp_get_buffer_raise(data, &info, MP_BUFFER_READ);
        char *copy = m_new(char, info.len ? info.len : 1);
        memcpy(copy, info.buf, info.len);
        *len = info.len;
        return copy;
    }
    mp_obj_t f = file_open(abs, "rb");
    c6_file_t *file = MP_OBJ_TO_PTR(f);
    lfs_soff_t size = lfs_file_size(&c6_lfs, &file->file);
    char *data = m_new(char, size > 0 ? size : 1);
    lfs_ssize_t n = lfs_file_read(&c6_lfs, &file->file, data, size);
    file->open = false;
    lfs_file_close(&c6_lfs, &file->file);
    check(n);
    *len = n;
    return data;
}

mp_lexer_t *mp_lexer_new_from_file(qstr filename) {
    size_t len;
    char *data = read_whole(qstr_str(filename), &len);
    return mp_lexer_new_from_str_len(filename, data, len, len);
}

void mp_reader_new_file(mp_reader_t *reader, qstr filename) {
    size_t len;
    char *data = read_whole(qstr_str(filename), &len);
    mp_reader_new_mem(reader, (const byte *)data, len, len);
}

// ---- os ----

static mp_obj_t os_getcwd(void) {
    return mp_obj_new_str(cwd, strlen(cwd));
}
static MP_DEFINE_CONST_FUN_OBJ_0(os_getcwd_obj, os_getcwd);

static mp_obj_t os_chdir(mp_obj_t path_in) {
    char buf[PATH_MAX_LEN];
    const char *path = arg_path(path_in, buf), *rel;
    mp_obj_t vfs = mounted(path, &rel);
    if (vfs != MP_OBJ_NULL) {
        vfs_call(vfs, MP_QSTR_chdir, rel, 0, NULL);
    } else if (!flash_is_dir(path)) {
        mp_raise_OSError(MP_ENOTDIR);
    }
    strcpy(cwd, path);
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_1(os_chdir_obj, os_chdir);

typedef struct {
    mp_obj_base_t base;
    mp_fun_1_t iternext;
    lfs_dir_t dir;
    bool open;
    bool want_str;
} ilistdir_it_t;

static mp_obj_t ilistdir_next(mp_obj_t self_in) {
    ilistdir_it_t *self = MP_OBJ_TO_PTR(self_in);
    struct lfs_info info;
    while (self->open) {
        int r = lfs_dir_read(&c6_lfs, &self->dir, &info);
        if (r <= 0) {
            self->open = false;
            lfs_dir_close(&c6_lfs, &self->dir);
            check(r);
            break;
        }
        if (strcmp(info.name, ".") == 0 || strcmp(info.name, "..") == 0) {
            continue;
        }
        mp_obj_t t[4] = {
            self->want_str ? mp_obj_new_str(info.name, strlen(info.name))
                           : mp_obj_new_bytes((const byte *)info.name, strlen(info.name)),
            MP_OBJ_NEW_SMALL_INT(info.type == LFS_TYPE_DIR ? MODE_DIR : MODE_FILE),
            MP_OBJ_NEW_SMALL_INT(0),
            mp_obj_new_int_from_uint(info.type == LFS_TYPE_DIR ? 0 : info.size),
        };
        return mp_obj_new_tuple(4, t);
    }
    return MP_OBJ_STOP_ITERATION;
}

static mp_obj_t os_ilistdir(size_t n_args, const mp_obj_t *args) {
    mp_obj_t path_in = n_args ? args[0] : MP_OBJ_NEW_QSTR(MP_QSTR_);
    char buf[PATH_MAX_LEN];
    const char *path = arg_path(path_in, buf), *rel;
    mp_obj_t vfs = mounted(path, &rel);
    if (vfs != MP_OBJ_NULL) {
        return vfs_call(vfs, MP_QSTR_ilistdir, rel, 0, NULL);
    }
    ilistdir_it_t *it = mp_obj_malloc(ilistdir_it_t, &mp_type_polymorph_iter);
    it->iternext = ilistdir_next;
    it->want_str = !mp_obj_is_type(path_in, &mp_type_bytes);
    it->open = false;
    check(lfs_dir_open(&c6_lfs, &it->dir, path));
    it->open = true;
    return MP_OBJ_FROM_PTR(it);
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(os_ilistdir_obj, 0, 1, os_ilistdir);

static mp_obj_t os_listdir(size_t n_args, const mp_obj_t *args) {
    mp_obj_t it = mp_getiter(os_ilistdir(n_args, args), NULL);
    mp_obj_t list = mp_obj_new_list(0, NULL);
    mp_obj_t entry;
    while ((entry = mp_iternext(it)) != MP_OBJ_STOP_ITERATION) {
        mp_obj_list_append(list, mp_obj_subscr(entry, MP_OBJ_NEW_SMALL_INT(0), MP_OBJ_SENTINEL));
    }
    return list;
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(os_listdir_obj, 0, 1, os_listdir);

static mp_obj_t flash_stat(const char *path) {
    struct lfs_info info;
    check(lfs_stat(&c6_lfs, path, &info));
    mp_obj_tuple_t *t = MP_OBJ_TO_PTR(mp_obj_new_tuple(10, NULL));
    for (int i = 0; i < 10; i++) {
        t->items[i] = MP_OBJ_NEW_SMALL_INT(0);
    }
    t->items[0] = MP_OBJ_NEW_SMALL_INT(info.type == LFS_TYPE_DIR ? MODE_DIR : MODE_FILE);
    t->items[6] = mp_obj_new_int_from_uint(info.type == LFS_TYPE_DIR ? 0 : info.size);
    return MP_OBJ_FROM_PTR(t);
}

static mp_obj_t os_stat(mp_obj_t path_in) {
    return path_call(path_in, MP_QSTR_stat, flash_stat);
}
static MP_DEFINE_CONST_FUN_OBJ_1(os_stat_obj, os_stat);

static mp_obj_t flash_statvfs(const char *path) {
    lfs_ssize_t used = lfs_fs_size(&c6_lfs);
    check(used);
    uint32_t blocks = c6_fs_block_count();
    uint32_t free_blocks = blocks > (uint32_t)used ? blocks - used : 0;
    mp_obj_t t[10] = {
        MP_OBJ_NEW_SMALL_INT(4096), MP_OBJ_NEW_SMALL_INT(4096), mp_obj_new_int_from_uint(blocks),
        mp_obj_new_int_from_uint(free_blocks), mp_obj_new_int_from_uint(free_blocks), MP_OBJ_NEW_SMALL_INT(0),
        MP_OBJ_NEW_SMALL_INT(0), MP_OBJ_NEW_SMALL_INT(0), MP_OBJ_NEW_SMALL_INT(0), MP_OBJ_NEW_SMALL_INT(LFS_NAME_MAX),
    };
    return mp_obj_new_tuple(10, t);
}

static mp_obj_t os_statvfs(mp_obj_t path_in) {
    return path_call(path_in, MP_QSTR_statvfs, flash_statvfs);
}
static MP_DEFINE_CONST_FUN_OBJ_1(os_statvfs_obj, os_statvfs);

// The entry at `path` on the flash removed: a directory (`dir`, os.rmdir) or anything else (os.remove).
static mp_obj_t flash_unlink(const char *path, bool dir) {
    if (flash_is_dir(path) != dir) {
        mp_raise_OSError(dir ? MP_ENOTDIR : MP_EISDIR);
    }
    check(lfs_remove(&c6_lfs, path));
    return mp_const_none;
}

static mp_obj_t flash_remove(const char *path) {
    return flash_unlink(path, false);
}

static mp_obj_t flash_rmdir(const char *path) {
    return flash_unlink(path, true);
}

static mp_obj_t os_remove(mp_obj_t path_in) {
    return path_call(path_in, MP_QSTR_remove, flash_remove);
}
static MP_DEFINE_CONST_FUN_OBJ_1(os_remove_obj, os_remove);

static mp_obj_t os_rmdir(mp_obj_t path_in) {
    return path_call(path_in, MP_QSTR_rmdir, flash_rmdir);
}
static MP_DEFINE_CONST_FUN_OBJ_1(os_rmdir_obj, os_rmdir);

static mp_obj_t flash_mkdir(const char *path) {
    check(lfs_mkdir(&c6_lfs, path));
    return mp_const_none;
}

static mp_obj_t os_mkdir(mp_obj_t path_in) {
    return path_call(path_in, MP_QSTR_mkdir, flash_mkdir);
}
static MP_DEFINE_CONST_FUN_OBJ_1(os_mkdir_obj, os_mkdir);

static mp_obj_t os_rename(mp_obj_t old_in, mp_obj_t new_in) {
    char a[PATH_MAX_LEN], b[PATH_MAX_LEN];
    const char *old = arg_path(old_in, a), *new = arg_path(new_in, b), *rel_old, *rel_new;
    mp_obj_t vfs = mounted(old, &rel_old);
    if ((mounted(new, &rel_new) != MP_OBJ_NULL) != (vfs != MP_OBJ_NULL)) {
        mp_raise_OSError(MP_EXDEV); // across filesystems
    }
    if (vfs != MP_OBJ_NULL) {
        mp_obj_t to = mp_obj_new_str(rel_new, strlen(rel_new));
        return vfs_call(vfs, MP_QSTR_rename, rel_old, 1, &to);
    }
    check(lfs_rename(&c6_lfs, old, new));
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_2(os_rename_obj, os_rename);

static mp_obj_t os_mount(size_t n_args, const mp_obj_t *pos, mp_map_t *kw) {
    static const mp_arg_t allowed[] = {
        { MP_QSTR_, MP_ARG_REQUIRED | MP_ARG_OBJ, {.u_rom_obj = MP_ROM_NONE} },
        { MP_QSTR_, MP_ARG_REQUIRED | MP_ARG_OBJ, {.u_rom_obj = MP_ROM_NONE} },
        { MP_QSTR_readonly, MP_ARG_KW_ONLY | MP_ARG_BOOL, {.u_bool = false} },
        { MP_QSTR_mkfs, MP_ARG_KW_ONLY | MP_ARG_BOOL, {.u_bool = false} },
    };
    mp_arg_val_t a[4];
    mp_arg_parse_all(n_args, pos, kw, 4, allowed, a);
    char buf[PATH_MAX_LEN];
    const char *path = arg_path(a[1].u_obj, buf);
    if (strcmp(path, "/") == 0 || mount_path[0]) {
        mp_raise_OSError(MP_EPERM); // the flash's filesystem stays at /; one other mount at a time
    }
    mp_obj_t call[4];
    mp_load_method(a[0].u_obj, MP_QSTR_mount, call);
    call[2] = mp_obj_new_bool(a[2].u_bool);
    call[3] = mp_obj_new_bool(a[3].u_bool);
    mp_call_method_n_kw(2, 0, call);
    MP_STATE_PORT(c6_mounted_vfs) = a[0].u_obj;
    strcpy(mount_path, path);
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_KW(os_mount_obj, 2, os_mount);

static mp_obj_t os_umount(mp_obj_t what) {
    char buf[PATH_MAX_LEN];
    bool match = mount_path[0] && (mp_obj_is_str(what) ? strcmp(arg_path(what, buf), mount_path) == 0
                                                        : what == MP_STATE_PORT(c6_mounted_vfs));
    if (!match) {
        mp_raise_OSError(MP_EINVAL);
    }
    mp_obj_t vfs = MP_STATE_PORT(c6_mounted_vfs);
    size_t n = strlen(mount_path);
    if (strncmp(cwd, mount_path, n) == 0 && (cwd[n] == 0 || cwd[n] == '/')) {
        strcpy(cwd, "/");
    }
    mount_path[0] = 0;
    MP_STATE_PORT(c6_mounted_vfs) = MP_OBJ_NULL;
    mp_call_method_n_kw(0, 0, (mp_obj_t[]) {mp_load_attr(vfs, MP_QSTR_umount), MP_OBJ_NULL});
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_1(os_umount_obj, os_umount);

// The flash's littlefs, as `vfs.mount()` lists it (the esp32 port's VfsLfs2 object at /).
static void lfs_vfs_print(const mp_print_t *print, mp_obj_t self_in, mp_print_kind_t kind) {
    mp_print_str(print, "<VfsLfs2>");
}
static MP_DEFINE_CONST_OBJ_TYPE(lfs_vfs_type, MP_QSTR_VfsLfs2, MP_TYPE_FLAG_NONE, print, lfs_vfs_print);
static const mp_obj_base_t lfs_vfs_obj = {&lfs_vfs_type};

// vfs.mount(): the mounts as (filesystem, path); with arguments, os.mount.
static mp_obj_t vfs_mount(size_t n_args, const mp_obj_t *pos, mp_map_t *kw) {
    if (n_args == 0 && kw->used == 0) {
        mp_obj_t list = mp_obj_new_list(0, NULL);
        if (c6_lfs_mounted) {
            mp_obj_t entry[2] = {MP_OBJ_FROM_PTR(&lfs_vfs_obj), MP_OBJ_NEW_QSTR(MP_QSTR__slash_)};
            mp_obj_list_append(list, mp_obj_new_tuple(2, entry));
        }
        if (mount_path[0]) {
            mp_obj_t entry[2] = {MP_STATE_PORT(c6_mounted_vfs), mp_obj_new_str(mount_path, strlen(mount_path))};
            mp_obj_list_append(list, mp_obj_new_tuple(2, entry));
        }
        return list;
    }
    return os_mount(n_args, pos, kw);
}
static MP_DEFINE_CONST_FUN_OBJ_KW(vfs_mount_obj, 0, vfs_mount);

static const mp_rom_map_elem_t vfs_module_globals_table[] = {
    { MP_ROM_QSTR(MP_QSTR___name__), MP_ROM_QSTR(MP_QSTR_vfs) },
    C6_FUN(vfs, mount),
    C6_FUN(os, umount),
};
C6_MODULE(MP_REGISTER_MODULE, vfs, vfs_module_globals_table);

// A soft reset unmounts (the mounted object belonged to the old heap), as on the esp32 port.
void c6_os_soft_reset(void) {
    mount_path[0] = 0;
    strcpy(cwd, "/");
}

static mp_obj_t os_sync(void) {
    return mp_const_none; // every write reaches the flash when the file is flushed or closed
}
static MP_DEFINE_CONST_FUN_OBJ_0(os_sync_obj, os_sync);

// urandom: the C6 has a hardware RNG; here a xorshift generator seeded from the MAC, so a board's runs repeat
static uint32_t rng_state;
uint32_t c6_random32(void) {
    if (rng_state == 0) {
        rng_state = 0x9e3779b9u;
        for (int i = 0; i < 6; i++) {
            rng_state = (rng_state ^ c6_bootinfo.mac[i]) * 16777619u;
        }
    }
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

static mp_obj_t os_urandom(mp_obj_t n_in) {
    mp_int_t n = mp_obj_get_int(n_in);
    vstr_t vstr;
    vstr_init_len(&vstr, n);
    for (mp_int_t i = 0; i < n; i++) {
        vstr.buf[i] = (char)c6_random32();
    }
    return mp_obj_new_bytes_from_vstr(&vstr);
}
static MP_DEFINE_CONST_FUN_OBJ_1(os_urandom_obj, os_urandom);

static const qstr uname_fields[] = {
    MP_QSTR_sysname, MP_QSTR_nodename, MP_QSTR_release, MP_QSTR_version, MP_QSTR_machine,
};
static const MP_DEFINE_STR_OBJ(uname_sysname, "esp32");
static const MP_DEFINE_STR_OBJ(uname_release, MICROPY_VERSION_STRING);
// the version names the counted clock: the agent reports its timing as qemu-icount from it
static const MP_DEFINE_STR_OBJ(uname_version, MICROPY_GIT_TAG " on " MICROPY_BUILD_DATE " qemu-icount");
static const MP_DEFINE_STR_OBJ(uname_machine, MICROPY_HW_BOARD_NAME " with " MICROPY_HW_MCU_NAME);
static MP_DEFINE_ATTRTUPLE(uname_info, uname_fields, 5,
    MP_ROM_PTR(&uname_sysname), MP_ROM_PTR(&uname_sysname), MP_ROM_PTR(&uname_release),
    MP_ROM_PTR(&uname_version), MP_ROM_PTR(&uname_machine));

static mp_obj_t os_uname(void) {
    return MP_OBJ_FROM_PTR(&uname_info);
}
static MP_DEFINE_CONST_FUN_OBJ_0(os_uname_obj, os_uname);

static const mp_rom_map_elem_t os_module_globals_table[] = {
    { MP_ROM_QSTR(MP_QSTR___name__), MP_ROM_QSTR(MP_QSTR_os) },
    C6_FUN(os, uname),
    C6_FUN(os, urandom),
    { MP_ROM_QSTR(MP_QSTR_sep), MP_ROM_QSTR(MP_QSTR__slash_) },
    C6_FUN(os, getcwd),
    C6_FUN(os, chdir),
    C6_FUN(os, ilistdir),
    C6_FUN(os, listdir),
    C6_FUN(os, stat),
    C6_FUN(os, statvfs),
    C6_FUN(os, remove),
    C6_FUN(os, rmdir),
    C6_FUN(os, mkdir),
    C6_FUN(os, rename),
    C6_FUN(os, sync),
    C6_FUN(os, mount),
    C6_FUN(os, umount),
};
C6_MODULE(MP_REGISTER_EXTENSIBLE_MODULE, os, os_module_globals_table);
