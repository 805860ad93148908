// What the chip's hardware RNG (esp_random) is to its MicroPython: here xorshift128, seeded at each boot from
// the entropy the board hands over in the bootinfo (the host's random bytes), so every boot draws other numbers.
// os.urandom and random's default seed come from it.
#include <stdint.h>

#include "virt.h"

static uint32_t state[4];

static void seed(void) {
    uint32_t h = 0x811c9dc5u; // FNV-1a over the MAC: two boards given the same entropy still differ
    for (int i = 0; i < 6; i++) {
        h = (h ^ c6_bootinfo.mac[i]) * 16777619u;
    }
    state[0] = c6_bootinfo.entropy[0] ^ h;
    state[1] = c6_bootinfo.entropy[1] ^ 0x9e3779b9u;
    state[2] = c6_bootinfo.entropy[2] ^ 0x7f4a7c15u;
    state[3] = c6_bootinfo.entropy[3] | 1u; // never all zero
}

uint32_t c6_random32(void) {
    if ((state[0] | state[1] | state[2] | state[3]) == 0) {
        seed();
    }
    uint32_t t = state[3];
    uint32_t s = state[0];
    state[3] = state[2];
    state[2] = state[1];
    state[1] = s;
    t ^= t << 11;
    t ^= t >> 8;
    state[0] = t ^ s ^ (s >> 19);
    return state[0];
}
