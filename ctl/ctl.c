/* ctl.c: placeholder until tetherctl lands. */
#include "ctl.h"
#include <stdio.h>
int ctl_main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "tetherctl: not built yet\n");
	return 2;
}
