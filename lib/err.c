/* SPDX-License-Identifier: Apache-2.0 */
#include "lib/err.h"

#include <stdarg.h>

static int neg(int r) { return r > 0 ? -r : r == 0 ? -EIO : r; }

int bk_fail(struct bk_error *e, int r, const char *layer, const char *fmt, ...)
{
	r = neg(r);
	if (!e)
		return r;
	e->r = r;
	snprintf(e->layer, sizeof(e->layer), "%s", layer ? layer : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return r;
}

int bk_fail_buf(char *buf, size_t len, int r, const char *fmt, ...)
{
	if (buf && len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(buf, len, fmt, ap);
		va_end(ap);
	}
	return neg(r);
}
