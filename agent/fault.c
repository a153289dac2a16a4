/* fault.c: the hook of the fault points (fault.h); NULL in tetherd. */
#include "fault.h"

#include <stddef.h>

void (*fault_hook)(const char *point) = NULL;
