/* ctl.h: tetherctl's commands over the plane's admin API. */
#ifndef TETHER_CTL_H
#define TETHER_CTL_H

int ctl_main(int argc, char **argv);

#endif
