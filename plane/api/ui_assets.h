/* api/ui_assets.h: the console's static files (plane/ui/), compiled into the
 * plane by scripts/embed-ui at build time; the list ends with a NULL name. */
#ifndef TETHER_UI_ASSETS_H
#define TETHER_UI_ASSETS_H

#include <stddef.h>

struct ui_asset {
	const char *name;
	const unsigned char *data;
	size_t len;
};

extern const struct ui_asset ui_assets[];

#endif
