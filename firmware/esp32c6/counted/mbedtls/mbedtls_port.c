// What mbedTLS asks of the board: entropy (the board's RNG, rng.c, where the chip has its hardware RNG) and the
// RTC's time.
#include "py/mphal.h"

#if MICROPY_SSL_MBEDTLS

#include "mbedtls_config_port.h"
#include "mbedtls/platform_time.h"

uint32_t c6_random32(void);

int mbedtls_hardware_poll(void *data, unsigned char *output, size_t len, size_t *olen) {
    (void)data;
    uint32_t r = 0;
    for (size_t i = 0; i < len; i++) {
        if ((i & 3) == 0) {
            r = c6_random32();
        }
        output[i] = r;
        r >>= 8;
    }
    *olen = len;
    return 0;
}

time_t c6_mbedtls_time(time_t *timer) {
    time_t now = mp_hal_time_ns() / 1000000000u;
    if (timer != NULL) {
        *timer = now;
    }
    return now;
}

mbedtls_ms_time_t mbedtls_ms_time(void) {
    return mp_hal_time_ns() / 1000000u;
}

#endif
