/* Error messages into a caller's buffer: `return errorf(err, errlen, ...)`. */
#ifndef ROOMBOX_ERRBUF_H
#define ROOMBOX_ERRBUF_H
#include <stdarg.h>
#include <stdio.h>

static inline int __attribute__((format(printf, 3, 4)))
errorf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

#endif
