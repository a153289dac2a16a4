/* fault.h: named points of the apply pipeline where a test build can stop
 * the agent dead, to show that whatever it left behind boots right
 * (t0235). tetherd never sets fault_hook: a fault point costs it the test
 * of a NULL pointer. The test program tests/tools/tetherd-faults (tetherd
 * with tests/tools/faults.c linked in) sets it from TETHERD_FAULT (or
 * TETHERD_PAUSE, to stop there alive until the test lets it go). The
 * consumers, below the core, reach theirs through consumer_options.fault
 * (the core hands them fault_point). */
#ifndef TETHER_FAULT_H
#define TETHER_FAULT_H

extern void (*fault_hook)(const char *point);

static inline void fault_point(const char *point)
{
	if (fault_hook)
		fault_hook(point);
}

#endif
