// MicroPython configuration of the counted virtual ESP32-C6 (RV32IMAC on QEMU virt): the core and extmod's
// modules as ports/esp32/mpconfigport.h and boards/ESP32_GENERIC_C6 enable them, where no ESP-IDF is needed.
#include <stdint.h>

#define MICROPY_CONFIG_ROM_LEVEL            (MICROPY_CONFIG_ROM_LEVEL_EXTRA_FEATURES)

// what the board reports, as MicroPython's esp32 port on an ESP32-C6 module
#define MICROPY_HW_BOARD_NAME               "ESP32C6 module"
#define MICROPY_HW_MCU_NAME                 "ESP32C6"
#define MICROPY_PY_SYS_PLATFORM             "esp32"
// the build names the counted clock (banner, os.uname().version): the agent reports its timing as qemu-icount
#define MICROPY_BUILD_TYPE                  "qemu-icount"

// code generation: bytecode, and native/viper through the RV32 emitter, as on the chip
#define MICROPY_EMIT_RV32                   (1)
#define MICROPY_EMIT_INLINE_RV32            (1)
#define MICROPY_PERSISTENT_CODE_LOAD        (1)
#define MICROPY_NLR_RV32I                   (1)
#define MICROPY_GCREGS_SETJMP               (0)

// memory
#define MICROPY_ALLOC_PATH_MAX              (128)
#define MICROPY_ENABLE_GC                   (1)
#define MICROPY_ENABLE_FINALISER            (1)
#define MICROPY_STACK_CHECK                 (1)
#define MICROPY_ENABLE_EMERGENCY_EXCEPTION_BUF (1)
#define MICROPY_EMERGENCY_EXCEPTION_BUF_SIZE (0)
#define MICROPY_LONGINT_IMPL                (MICROPY_LONGINT_IMPL_MPZ)
#define MICROPY_FLOAT_IMPL                  (MICROPY_FLOAT_IMPL_FLOAT)
#define MICROPY_ERROR_REPORTING             (MICROPY_ERROR_REPORTING_NORMAL)
#define MICROPY_WARNINGS                    (1)

// the REPL and console
#define MICROPY_HELPER_REPL                 (1)
#define MICROPY_REPL_AUTO_INDENT            (1)
#define MICROPY_REPL_EMACS_KEYS             (1)
#define MICROPY_KBD_EXCEPTION               (1)
#define MICROPY_PY_SYS_STDFILES             (1)
#define MICROPY_PY_SYS_STDIO_BUFFER         (1)
#define MICROPY_ENABLE_SCHEDULER            (1)
#define MICROPY_SCHEDULER_DEPTH             (8)
#define MICROPY_PY_MICROPYTHON_RINGIO       (1)
#define MICROPY_ENABLE_COMPILER             (1)

// extmod's modules, as the esp32 port enables them
#define MICROPY_PY_IO_BUFFEREDWRITER        (1)
#define MICROPY_PY_OS                       (1)
#define MICROPY_PY_OS_INCLUDEFILE           "port_os.c"
#define MICROPY_PY_OS_SYNC                  (1)
#define MICROPY_PY_OS_UNAME                 (1)
#define MICROPY_PY_OS_URANDOM               (1)
#define MICROPY_VFS                         (1)
#define MICROPY_READER_VFS                  (1)
#define MICROPY_FATFS_ENABLE_LFN            (1) // vfs.VfsFat, configured as the esp32 port does
#define MICROPY_FATFS_RPATH                 (2)
#define MICROPY_FATFS_MAX_SS                (4096)
#define MICROPY_FATFS_LFN_CODE_PAGE         437
#define MICROPY_PY_TIME                     (1)
#define MICROPY_PY_TIME_GMTIME_LOCALTIME_MKTIME (1)
#define MICROPY_PY_TIME_TIME_TIME_NS        (1)
#define MICROPY_PY_TIME_CUSTOM_SLEEP        (1)
#define MICROPY_PY_TIME_INCLUDEFILE         "port_time.c"
#define MICROPY_PY_HASHLIB                  (1)
#define MICROPY_PY_HASHLIB_SHA256           (1)
#define MICROPY_PY_HASHLIB_MD5              (1) // md5, sha1, cryptolib and tls through mbedTLS (Makefile)
#define MICROPY_PY_HASHLIB_SHA1             (1)
#define MICROPY_PY_CRYPTOLIB                (1)
#define MICROPY_TRACKED_ALLOC               (MICROPY_SSL_MBEDTLS) // mbedTLS's buffers on MicroPython's heap
#define MICROPY_PY_RANDOM                   (1)
#define MICROPY_PY_RANDOM_EXTRA_FUNCS       (1)
#define MICROPY_PY_RANDOM_SEED_INIT_FUNC    (c6_random32())
uint32_t c6_random32(void); // rng.c: the chip's esp_random()
#define MICROPY_PY_JSON                     (1)
#define MICROPY_PY_RE                       (1)
#define MICROPY_PY_SELECT                   (1)
#define MICROPY_PY_HEAPQ                    (1)
#define MICROPY_PY_BINASCII                 (1)
#define MICROPY_PY_BINASCII_CRC32           (1)
#define MICROPY_PY_DEFLATE                  (1)
#define MICROPY_PY_DEFLATE_COMPRESS         (1)
#define MICROPY_PY_UCTYPES                  (1)
#define MICROPY_PY_FRAMEBUF                 (1)
#define MICROPY_PY_PLATFORM                 (1)
#define MICROPY_PY_MARSHAL                  (1)
#define MICROPY_PY_FUNCTION_ATTRS_CODE      (1) // what marshal needs (function.__code__)
#define MICROPY_PY_ASYNCIO                  (1)
#define MICROPY_PY_WEBSOCKET                (1)
#define MICROPY_PY_MACHINE                  (0) // machine is the port's (modules/machine.py on modmachine.c)
#define MICROPY_PY_OS_DUPTERM               (0)
#define MICROPY_EPOCH_IS_1970               (1)
#define MICROPY_PY_SYS_EXIT                 (1)
#define MICROPY_PY_SYS_MODULES              (1)
#define MICROPY_PY_BUILTINS_HELP            (1)
#define MICROPY_PY_BUILTINS_HELP_MODULES    (1)
#define MICROPY_PY_BUILTINS_INPUT           (1)
#define MICROPY_USE_INTERNAL_PRINTF         (1)

// waiting for events idles the core in wfi on the counted clock (mphalport.c)
#define MICROPY_INTERNAL_WFE(TIMEOUT_MS) c6_wfe(TIMEOUT_MS)
void c6_wfe(int timeout_ms);

#define MP_SSIZE_MAX                        (0x7fffffff)
typedef intptr_t mp_int_t; // must be pointer size
typedef uintptr_t mp_uint_t;
typedef long mp_off_t;

#define MICROPY_HEAP_SIZE                   (300 * 1024) // the free heap of MicroPython on the chip
#define MP_STATE_PORT MP_STATE_VM

#include <alloca.h>
