/* agent.h: tetherd's life: boot from last-good, render it, dial the plane,
 * apply every push to a copy, validate it whole, stage, check, swap,
 * reload, persist, ACK -- or NACK and keep what runs. One event loop over
 * libcurl's multi interface: the stream (or poll) and the ACKs share it. */
#ifndef TETHER_AGENT_H
#define TETHER_AGENT_H

#include "agent_config.h"

/* Runs the agent until SIGTERM/SIGINT (or, with --once, one sync). argv is
 * kept for SIGHUP, which re-reads the config file with the command line on
 * top. Returns the process exit code. */
int agent_run(struct agent_config *cfg, int argc, char **argv);

#endif
