// The HAL of the counted ESP32-C6 port: console on a virtio console, time from the counted clock.
#include "shared/runtime/interrupt_char.h"

#define mp_hal_delay_us_fast(us) mp_hal_delay_us(us)
void c6_wait_events(void);

// pins are machine.Pin objects of modmachine.c (no generic virtual-pin API)
#define mp_hal_pin_obj_t mp_obj_t
