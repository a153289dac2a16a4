/* fuzz.h: the libFuzzer entry point every target defines and replay.c calls. */
#ifndef TETHER_FUZZ_H
#define TETHER_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
