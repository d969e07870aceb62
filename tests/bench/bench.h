/* SPDX-License-Identifier: MIT */
/* Shared by the benchmark helpers (header-only): clocks and percentiles. */
#ifndef IOFS_TESTS_BENCH_H
#define IOFS_TESTS_BENCH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline int64_t bench_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int bench_cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* Nearest-rank percentile of @v (sorted, @n > 0), @p in [0, 100]. */
static inline int64_t bench_pct(const int64_t *v, size_t n, double p)
{
	size_t k = (size_t)((p / 100.0) * (double)n + 0.999999);
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

/*
 * Sort @v and print one machine-readable line:
 *   "<name> n=N p50_us=.. p90_us=.. p99_us=.. mean_us=.. min_us=.. max_us=.."
 * (values in microseconds, 1 decimal).  @v is sorted in place.
 */
static inline void bench_report(const char *name, int64_t *v, size_t n)
{
	if (n == 0) {
		printf("%s n=0\n", name);
		return;
	}
	qsort(v, n, sizeof(*v), bench_cmp_i64);
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += (double)v[i];
	printf("%s n=%zu p50_us=%.1f p90_us=%.1f p99_us=%.1f mean_us=%.1f "
	       "min_us=%.1f max_us=%.1f\n",
	       name, n, (double)bench_pct(v, n, 50) / 1e3,
	       (double)bench_pct(v, n, 90) / 1e3,
	       (double)bench_pct(v, n, 99) / 1e3, sum / (double)n / 1e3,
	       (double)v[0] / 1e3, (double)v[n - 1] / 1e3);
	fflush(stdout);
}

#endif
