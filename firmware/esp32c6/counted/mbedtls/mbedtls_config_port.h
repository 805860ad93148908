// mbedTLS for the counted virtual ESP32-C6: MicroPython's common configuration (extmod/mbedtls), bare metal, as
// the chip's build has it through ESP-IDF (hashlib md5/sha1/sha256, cryptolib, tls with DTLS). What differs from
// ESP-IDF's: no hardware AES/SHA (the chip's accelerators: here the C code, counted instruction by instruction),
// and its buffers come from MicroPython's heap (the chip's from ESP-IDF's heap, beside MicroPython's).
#ifndef MICROPY_INCLUDED_MBEDTLS_CONFIG_PORT_H
#define MICROPY_INCLUDED_MBEDTLS_CONFIG_PORT_H

#define MBEDTLS_ECP_NIST_OPTIM

// time for certificate checks: the RTC (machine.RTC), as the esp32 port's
#include <time.h>
time_t c6_mbedtls_time(time_t *timer);
#define MBEDTLS_PLATFORM_TIME_MACRO c6_mbedtls_time
#define MBEDTLS_PLATFORM_MS_TIME_ALT

#define MICROPY_MBEDTLS_CONFIG_BARE_METAL (1)

#include "extmod/mbedtls/mbedtls_config_common.h"

#endif // MICROPY_INCLUDED_MBEDTLS_CONFIG_PORT_H
