// SPDX-License-Identifier: GPL-2.0
/*
 * --sample's estimator (user/sampling.c): the probability a block is sampled, what it stands
 * for, the gaps the BPF side draws from, and the per-class lines it weighs blocks with; then
 * the whole scheme, run as the BPF side runs it on a known population many times over: the
 * Horvitz-Thompson estimates are unbiased within their margin, and the margins hold the
 * truth as often as they say.
 */
#include <linux/types.h>

#include "heaptap.h"
#include "probe/sampling.h"
#include "unit.h"

#define KIB 1024ULL
#define MIB (1024 * KIB)

static void probabilities(void)
{
	const uint64_t interval = 512 * KIB;

	CHECK_NEAR(sampling__p(100, 0), 1, 0, "no sampling: every block");
	CHECK_NEAR(sampling__p(0, interval), 1, 0, "size 0: counts as itself");
	CHECK_NEAR(sampling__p(interval, interval), 1 - exp(-1), 1e-16, "a block of the interval");
	CHECK_NEAR(sampling__p(1, interval), 1.0 / interval, 1e-6 / interval, "1 byte");
	CHECK_NEAR(sampling__p(64 * MIB, interval), 1, 0, "128 intervals: always");
	/* s / p(s) = I x / (1 - e^-x) with x = s / I: I + s/2 for small blocks, s for big ones. */
	CHECK_NEAR(sampling__stands_for(interval, interval), interval / (1 - exp(-1)), 1e-9,
		   "a block of the interval");
	CHECK_NEAR(sampling__stands_for(1, interval), interval + 0.5, 1e-6, "1 byte");
	CHECK_NEAR(sampling__stands_for(64, interval), interval + 32, 1e-3, "64 bytes");
	CHECK_NEAR(sampling__stands_for(64 * MIB, interval), 64 * MIB, 0, "128 intervals");
	CHECK_NEAR(sampling__stands_for(0, interval), 0, 0, "size 0");
}

/* The gaps: evenly spread quantiles of the exponential law of mean interval. */
static void gaps(void)
{
	const uint64_t interval = 512 * KIB;
	double sum = 0;
	uint64_t gap, last = UINT64_MAX;
	uint32_t i;

	for (i = 0; i < HEAPTAP_SAMPLE_GAPS; i++) {
		gap = sampling__gap(i, interval);
		sum += gap;
		if (!CHECK_TRUE(gap < last, "gap %u below gap %u", i, i - 1))
			break;
		last = gap;
	}
	CHECK_U64(sampling__gap(0, interval), (uint64_t)(log(2.0 * HEAPTAP_SAMPLE_GAPS) * interval),
		  "the longest gap: the 1/8192 quantile");
	CHECK_U64(sampling__gap(HEAPTAP_SAMPLE_GAPS - 1, interval), 64, "the shortest gap");
	/* The midpoints' rule misses a little of the log's tail: 8.5e-5 of the mean. */
	CHECK_NEAR(sum / HEAPTAP_SAMPLE_GAPS / interval, 1, 1e-4, "the gaps' mean, in intervals");
}

/* What the BPF side adds for a block of size bytes (bpf/part/sampling.bpf.h's weight()). */
static uint64_t bpf_weight(const struct heaptap_weight *w, __u64 size)
{
	__u64 min = heaptap_size_class_min(heaptap_size_class(size));

	return w->base + (size > min ? ((size - min) * w->slope) >> HEAPTAP_WEIGHT_SHIFT : 0);
}

/*
 * Each class's line, at its first, middle and last sizes, against what they stand for:
 * within a byte and 0.1% (a line drawn through a curve an eighth of a power of two wide).
 * Up to 2^51: past it the BPF side's (size - min) * slope passes 2^64, but no block is that
 * large (mmap gives user space no address above 2^47 unless asked to).
 */
static void weights(void)
{
	static const uint64_t intervals[] = { 4 * KIB, 64 * KIB, 512 * KIB, 16 * MIB, 1ULL << 40 };
	struct heaptap_weight w;
	double want, worst = 0;
	__u64 min, last, size;
	size_t k;
	__u32 cls;
	int at;

	for (k = 0; k < sizeof(intervals) / sizeof(intervals[0]); k++) {
		for (cls = 0; cls < HEAPTAP_SIZE_CLASSES; cls++) {
			min = heaptap_size_class_min(cls);
			last = heaptap_size_class_min(cls + 1) - 1;
			w = sampling__weight(cls, intervals[k]);
			if (cls <= HEAPTAP_SIZE_EXACT_MAX)
				CHECK_U64(w.slope, 0, "class %u of one size: no slope", cls);
			if (min >= 1ULL << 51)
				break;
			for (at = 0; at < 3; at++) {
				size = at == 0 ? min : at == 1 ? min + (last - min) / 2 : last;
				if (min >= 1ULL << 48) {
					/* Sampled every time: each stands for itself. */
					CHECK_U64(bpf_weight(&w, size), size,
						  "%" PRIu64 " B, interval %" PRIu64,
						  (uint64_t)size, intervals[k]);
					continue;
				}
				want = sampling__stands_for(size, intervals[k]);
				CHECK_NEAR(bpf_weight(&w, size), want, 1 + 1e-3 * want,
					   "%" PRIu64 " B, interval %" PRIu64, (uint64_t)size,
					   intervals[k]);
				worst = fmax(worst, fabs(bpf_weight(&w, size) - want) / want);
			}
		}
	}
	CHECK_TRUE(worst > 0 && worst < 1e-3, "the lines' worst error, relative: %g", worst);
}

/*
 * The population: blocks of sizes from 24 B to 8 MiB, in a fixed shuffled order, sampled as
 * the BPF side samples (a thread's countdown from gaps drawn at random from the table).
 */
#define INTERVAL (64 * KIB)
#define TRIALS 1000

struct population {
	__u64 *sizes;
	size_t n;
	double bytes; /* the truth */
};

static void population__make(struct population *pop, uint64_t *seed)
{
	static const struct {
		__u64 size;
		size_t count;
	} mix[] = { { 24, 20000 },  { 700, 5000 },   { 4000, 2000 },
		    { 70000, 300 }, { 1 * MIB, 50 }, { 8 * MIB, 5 } };
	size_t i, k, j;
	__u64 t;

	pop->n = 0;
	for (i = 0; i < sizeof(mix) / sizeof(mix[0]); i++)
		pop->n += mix[i].count;
	pop->sizes = malloc(pop->n * sizeof(*pop->sizes));
	if (!pop->sizes)
		exit(2);
	pop->bytes = 0;
	for (i = 0, j = 0; i < sizeof(mix) / sizeof(mix[0]); i++)
		for (k = 0; k < mix[i].count; k++, j++) {
			pop->sizes[j] = mix[i].size;
			pop->bytes += mix[i].size;
		}
	for (i = pop->n - 1; i > 0; i--) {
		j = unit__random(seed) % (i + 1);
		t = pop->sizes[i];
		pop->sizes[i] = pop->sizes[j];
		pop->sizes[j] = t;
	}
}

struct estimate {
	double bytes, blocks, var; /* as accounting.c sums them */
	double weighed;		   /* as the BPF side's est_live_bytes */
};

/* One run over the population, as the BPF side samples and the loader weighs. */
static struct estimate run(const struct population *pop, const __u64 *gap_table,
			   const struct heaptap_weight *w, uint64_t *seed)
{
	struct estimate e = {};
	int64_t countdown = gap_table[unit__random(seed) % HEAPTAP_SAMPLE_GAPS];
	double p;
	size_t i;

	for (i = 0; i < pop->n; i++) {
		__u64 size = pop->sizes[i];

		if (size < (__u64)countdown) {
			countdown -= size;
			continue;
		}
		countdown = gap_table[unit__random(seed) % HEAPTAP_SAMPLE_GAPS];
		p = sampling__p(size, INTERVAL);
		e.bytes += size / p;
		e.blocks += 1 / p;
		e.var += (double)size * size * (1 - p) / (p * p);
		e.weighed += bpf_weight(&w[heaptap_size_class(size)], size);
	}
	return e;
}

static void monte_carlo(void)
{
	static __u64 gap_table[HEAPTAP_SAMPLE_GAPS];
	static struct heaptap_weight w[HEAPTAP_SIZE_CLASSES];
	double sum = 0, sum2 = 0, sum_var = 0, blocks = 0, blocks2 = 0, weighed = 0, weighed2 = 0;
	double mean, sd, se, mean_blocks, se_blocks, mean_weighed, se_weighed;
	struct population pop;
	struct estimate e;
	uint64_t seed = 2024;
	unsigned int i, covered = 0;

	for (i = 0; i < HEAPTAP_SAMPLE_GAPS; i++)
		gap_table[i] = sampling__gap(i, INTERVAL);
	for (i = 0; i < HEAPTAP_SIZE_CLASSES; i++)
		w[i] = sampling__weight(i, INTERVAL);
	population__make(&pop, &seed);
	for (i = 0; i < TRIALS; i++) {
		e = run(&pop, gap_table, w, &seed);
		sum += e.bytes;
		sum2 += e.bytes * e.bytes;
		sum_var += e.var;
		blocks += e.blocks;
		blocks2 += e.blocks * e.blocks;
		weighed += e.weighed;
		weighed2 += e.weighed * e.weighed;
		/* The report's margin: 1.96 standard deviations, 95%. */
		covered += fabs(e.bytes - pop.bytes) <= 1.96 * sqrt(e.var);
	}
	mean = sum / TRIALS;
	sd = sqrt(sum2 / TRIALS - mean * mean);
	se = sd / sqrt(TRIALS);
	mean_blocks = blocks / TRIALS;
	se_blocks = sqrt((blocks2 / TRIALS - mean_blocks * mean_blocks) / TRIALS);
	mean_weighed = weighed / TRIALS;
	se_weighed = sqrt((weighed2 / TRIALS - mean_weighed * mean_weighed) / TRIALS);
	/* Precise enough for the checks below to mean something. */
	CHECK_TRUE(se < 0.005 * pop.bytes, "the mean's standard error, %.0f B of %.0f", se,
		   pop.bytes);
	CHECK_NEAR(mean, pop.bytes, 3 * se, "live bytes: the estimates' mean, %u runs", TRIALS);
	CHECK_NEAR(mean_blocks, pop.n, 3 * se_blocks, "blocks: the estimates' mean");
	/* The BPF side's lines stand for a little more or less than s / p(s): 0.1% at most. */
	CHECK_NEAR(mean_weighed, pop.bytes, 3 * se_weighed + 1e-3 * pop.bytes,
		   "live bytes as the BPF side weighs them: the mean");
	/* The variance each run estimates for itself, against the runs' spread. */
	CHECK_NEAR(sum_var / TRIALS / (sd * sd), 1, 0.2, "the variance estimate, on average");
	CHECK_TRUE(covered >= 0.9 * TRIALS && covered <= 0.99 * TRIALS,
		   "95%% margins held the truth %u times of %u", covered, TRIALS);
	free(pop.sizes);
}

int main(void)
{
	probabilities();
	gaps();
	weights();
	monte_carlo();
	return unit__done("sampling");
}
