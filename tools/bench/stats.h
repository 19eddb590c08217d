/* Latency statistics shared by the bench programs. */
#ifndef ROOMBOX_BENCH_STATS_H
#define ROOMBOX_BENCH_STATS_H

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array. */
static double pct(const double *v, int n, double p)
{
	int k = (int)(p / 100.0 * n + 0.999999) - 1;
	if (k < 0)
		k = 0;
	if (k >= n)
		k = n - 1;
	return v[k];
}

#endif
