#include "timefmt.h"

#include <stdio.h>
#include <time.h>

void iso8601_utc(const struct timespec *ts, char *buf, size_t buflen)
{
	struct tm tm;
	long ms = ts->tv_nsec / 1000000;
	long long year;

	if (buflen == 0)
		return;
	if (!gmtime_r(&ts->tv_sec, &tm)) {
		buf[0] = '\0';
		return;
	}
	if (ms < 0 || ms > 999)
		ms = 0;
	year = (long long)tm.tm_year + 1900;
	/* Years outside 0..9999 get JavaScript's expanded form, "+010000". */
	snprintf(buf, buflen,
		 year >= 0 && year <= 9999 ? "%04lld-%02d-%02dT%02d:%02d:%02d.%03ldZ"
					   : "%+07lld-%02d-%02dT%02d:%02d:%02d.%03ldZ",
		 year, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

void iso8601_utc_ms(int64_t ms, char *buf, size_t buflen)
{
	int64_t s = ms / 1000, rest = ms % 1000;
	if (rest < 0) {   /* before 1970: the millisecond part counts up */
		s--;
		rest += 1000;
	}
	struct timespec ts = { (time_t)s, (long)rest * 1000000 };
	iso8601_utc(&ts, buf, buflen);
}
