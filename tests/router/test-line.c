/* SPDX-License-Identifier: MIT */
/* The merged view: formats, line discipline, partial lines, continuation. */
#include "harness.h"

struct mv {
	router_reader_t *rd;
	uint64_t off;
	char buf[1 << 18];
	size_t len;
};

static void mv_open(struct h *h, struct mv *m, const char *ns, uint32_t ch)
{
	memset(m, 0, sizeof(*m));
	assert_int_equal(router_reader_open(router_job_lookup(h->r, ns),
					    ROUTER_RANK_WILDCARD, ch, 0, NULL,
					    NULL, &m->rd),
			 0);
}

/* Everything new in the view, NUL-terminated. */
static const char *mv_new(struct mv *m)
{
	size_t n = h_drain(m->rd, &m->off, m->buf + m->len,
			   sizeof(m->buf) - m->len - 1);
	const char *s = m->buf + m->len;

	m->len += n;
	m->buf[m->len] = 0;
	return s;
}

static void tag_default_and_complete_lines(void **state)
{
	struct h *h = h_new(NULL);
	struct mv m;

	(void)state;
	h_reg(h, "j", 0, 2);
	h_reg(h, "j", 1, 2);
	mv_open(h, &m, "j", ROUTER_CH_STDOUT);
	h_puts(h, "j", 0, "hello\nwor");
	h_puts(h, "j", 1, "one\n");
	h_puts(h, "j", 0, "ld\n");
	assert_string_equal(mv_new(&m), "[j,0]<stdout>: hello\n"
					"[j,1]<stdout>: one\n"
					"[j,0]<stdout>: world\n");
	/* stderr and stddiag go to the merged stderr view. */
	{
		struct mv e;

		mv_open(h, &e, "j", ROUTER_CH_STDERR);
		h_put(h, "j", 1, ROUTER_CH_STDERR, "err\n", 4, 0, 0, NULL);
		h_put(h, "j", 1, ROUTER_CH_STDDIAG, "diag\n", 5, 0, 0, NULL);
		assert_string_equal(mv_new(&e), "[j,1]<stderr>: err\n"
						"[j,1]<stddiag>: diag\n");
		/* A partial stderr line, then stddiag: two separate lines. */
		h_put(h, "j", 1, ROUTER_CH_STDERR, "part", 4, 0, 0, NULL);
		h_put(h, "j", 1, ROUTER_CH_STDDIAG, "d2\n", 3, 0, 0, NULL);
		assert_string_equal(mv_new(&e), "[j,1]<stderr>: part\n"
						"[j,1]<stddiag>: d2\n");
		/* An open text line, then another rank's XML element. */
		h_put(h, "j", 0, ROUTER_CH_STDERR, "open", 4,
		      ROUTER_DIR_OUTPUT_RAW, ROUTER_DIR_OUTPUT_RAW, NULL);
		h_put(h, "j", 1, ROUTER_CH_STDERR, "x\n", 2,
		      ROUTER_DIR_XML_OUTPUT, ROUTER_DIR_XML_OUTPUT, NULL);
		assert_string_equal(mv_new(&e),
				    "[j,0]<stderr>: open\n"
				    "<stderr nspace=\"j\" rank=\"1\">x&#010;"
				    "</stderr>\n");
		router_reader_close(e.rd);
	}
	router_reader_close(m.rd);
	h_free(h);
}

static void partial_line_timer_and_continuation(void **state)
{
	struct h *h = h_new(NULL);
	struct mv m;
	struct router_stream_attr a;

	(void)state;
	h_reg(h, "p", 0, 2);
	h_reg(h, "p", 1, 2);
	mv_open(h, &m, "p", ROUTER_CH_STDOUT);
	h_puts(h, "p", 0, "Password: ");
	router_run_timers(h->r);
	assert_string_equal(mv_new(&m), ""); /* not yet: 100 ms */
	h->now += 99 * 1000000ull;
	router_run_timers(h->r);
	assert_string_equal(mv_new(&m), "");
	h->now += 1000000ull;
	router_run_timers(h->r);
	assert_string_equal(mv_new(&m), "[p,0]<stdout>: Password: ");
	/* The same rank continues its open line: no tag. */
	h_puts(h, "p", 0, "se");
	h->now += 100 * 1000000ull;
	router_run_timers(h->r);
	assert_string_equal(mv_new(&m), "se");
	/* Another rank's line ends the open one; continuation marked. */
	h_puts(h, "p", 1, "other\n");
	assert_string_equal(mv_new(&m), "\n[p,1]<stdout>: other\n");
	h_puts(h, "p", 0, "cret\nnext\n");
	assert_string_equal(mv_new(&m), "[p,0]<stdout>+ cret\n"
					"[p,0]<stdout>: next\n");
	/* A partial line still pending when another rank writes is simply
	 * held: nothing is cut. */
	h_puts(h, "p", 0, "abc");
	h_puts(h, "p", 1, "xyz\n");
	h_puts(h, "p", 0, "def\n");
	assert_string_equal(mv_new(&m), "[p,1]<stdout>: xyz\n"
					"[p,0]<stdout>: abcdef\n");
	/* Partial last line flushed on COMPLETE, line ended. */
	h_put(h, "p", 1, ROUTER_CH_STDOUT, "bye", 3, ROUTER_DIR_COMPLETE,
	      ROUTER_DIR_COMPLETE, NULL);
	assert_string_equal(mv_new(&m), "[p,1]<stdout>: bye\n");
	/* ... and on exit; the view completes with the job. */
	h_puts(h, "p", 0, "last");
	assert_int_equal(router_stream_attr(router_job_lookup(h->r, "p"),
					    ROUTER_RANK_WILDCARD,
					    ROUTER_CH_STDOUT, &a),
			 0);
	assert_false(a.complete);
	router_rank_exit(h->rk[1], ROUTER_STATE_EXITED, 0);
	router_rank_exit(h->rk[0], ROUTER_STATE_EXITED, 0);
	assert_string_equal(mv_new(&m), "[p,0]<stdout>: last\n");
	assert_true(router_reader_eof(m.rd, m.off));
	router_stream_attr(router_job_lookup(h->r, "p"), ROUTER_RANK_WILDCARD,
			   ROUTER_CH_STDOUT, &a);
	assert_true(a.complete);
	assert_int_equal(a.size, m.len);
	router_reader_close(m.rd);
	h_free(h);
}

/* The router's own evtimer drives router_run_timers(). */
static void loop_timer_flushes(void **state)
{
	struct router_config cfg = {.buffering_ms = 1};
	struct h *h = h_new(&cfg);
	struct mv m;

	(void)state;
	h_reg(h, "lt", 0, 1);
	mv_open(h, &m, "lt", ROUTER_CH_STDOUT);
	h_puts(h, "lt", 0, "prompt> ");
	h->now += 2 * 1000000ull;
	/* Bounded: the 1 ms timer is the only pending event. */
	for (int i = 0; i < 100 && m.len == 0; i++) {
		event_base_loop(h->base, EVLOOP_ONCE);
		mv_new(&m);
	}
	assert_string_equal(m.buf, "[lt,0]<stdout>: prompt> ");
	router_reader_close(m.rd);
	h_free(h);
}

static void partial_flushed_at_shutdown(void **state)
{
	struct h *h = h_new(NULL);
	struct mv m;

	(void)state;
	h_reg(h, "s", 0, 1);
	mv_open(h, &m, "s", ROUTER_CH_STDOUT);
	h_puts(h, "s", 0, "unterminated");
	router_shutdown(h->r);
	assert_string_equal(mv_new(&m), "[s,0]<stdout>: unterminated\n");
	assert_true(router_reader_eof(m.rd, m.off));
	router_reader_close(m.rd);
	h_free(h);
}

static void formats(void **state)
{
	struct h *h = h_new(NULL);
	struct mv m;
	const uint32_t T = ROUTER_DIR_TAG_OUTPUT, R = ROUTER_DIR_RANK_OUTPUT,
		       X = ROUTER_DIR_XML_OUTPUT, S = ROUTER_DIR_TIMESTAMP;

	(void)state;
	h_reg(h, "f", 0, 1);
	h_reg(h, "f", 7, 1);
	mv_open(h, &m, "f", ROUTER_CH_STDOUT);
	h_put(h, "f", 7, ROUTER_CH_STDOUT, "r\n", 2, R, R, NULL);
	assert_string_equal(mv_new(&m), "[7]<stdout>: r\n");
	h_put(h, "f", 0, ROUTER_CH_STDOUT, "plain\n", 6, T, 0, NULL);
	assert_string_equal(mv_new(&m), "plain\n");
	h_put(h, "f", 0, ROUTER_CH_STDOUT, "ts\n", 3, S, S, NULL);
	assert_string_equal(mv_new(&m),
			    "2025-12-01T14:40:00.000000Z [f,0]<stdout>: ts\n");
	h_put(h, "f", 0, ROUTER_CH_STDOUT, "a<b>&\"c\"\t\x01\n", 11, X, X,
	      NULL);
	assert_string_equal(mv_new(&m),
			    "<stdout nspace=\"f\" rank=\"0\">a&lt;b&gt;&amp;"
			    "&quot;c&quot;&#009;&#001;&#010;</stdout>\n");
	h_put(h, "f", 0, ROUTER_CH_STDOUT, "x\n", 2, X | S, X | S, NULL);
	assert_string_equal(mv_new(&m),
			    "<stdout nspace=\"f\" rank=\"0\" "
			    "time=\"2025-12-01T14:40:00.000000Z\">x&#010;"
			    "</stdout>\n");
	/* XML partial + continuation are whole elements. */
	h_put(h, "f", 0, ROUTER_CH_STDOUT, "part", 4, X, X, NULL);
	h->now += 200 * 1000000ull;
	router_run_timers(h->r);
	h_put(h, "f", 0, ROUTER_CH_STDOUT, "ial\n", 4, X, X, NULL);
	assert_string_equal(mv_new(&m),
			    "<stdout nspace=\"f\" rank=\"0\">part</stdout>\n"
			    "<stdout nspace=\"f\" rank=\"0\" cont=\"1\">"
			    "ial&#010;</stdout>\n");
	/* Unknown directives are ignored. */
	h_put(h, "f", 0, ROUTER_CH_STDOUT, "u\n", 2, 1u << 20, 1u << 20, NULL);
	assert_string_equal(mv_new(&m), "[f,0]<stdout>: u\n");
	/* RAW: no buffering delay, still no tag mid-line. */
	h_put(h, "f", 0, ROUTER_CH_STDOUT, "ab", 2, ROUTER_DIR_OUTPUT_RAW,
	      ROUTER_DIR_OUTPUT_RAW, NULL);
	assert_string_equal(mv_new(&m), "[f,0]<stdout>: ab");
	h_put(h, "f", 0, ROUTER_CH_STDOUT, "c\nd", 3, ROUTER_DIR_OUTPUT_RAW,
	      ROUTER_DIR_OUTPUT_RAW, NULL);
	assert_string_equal(mv_new(&m), "c\n[f,0]<stdout>: d");
	router_reader_close(m.rd);
	h_free(h);
}

static void job_default_directives_and_buffering_size(void **state)
{
	struct router_config cfg = {.buffering_size = 8};
	struct h *h = h_new(&cfg);
	struct router_rank_info info = {
	    .pid = 1, .dirs = {ROUTER_DIR_RANK_OUTPUT, ROUTER_DIR_RANK_OUTPUT}};
	router_proc_t p;
	router_rank_t *rk;
	struct mv m;

	(void)state;
	router_proc_set(&p, "d", 2);
	assert_int_equal(router_rank_register(h->r, &p, &info, NULL, NULL, &rk),
			 0);
	mv_open(h, &m, "d", ROUTER_CH_STDOUT);
	h_puts(h, "d", 2, "0123");
	assert_string_equal(mv_new(&m), "");
	h_puts(h, "d", 2, "4567");
	assert_string_equal(mv_new(&m), "[2]<stdout>: 01234567");
	/* A deliver's own directive overrides the job default. */
	h_put(h, "d", 2, ROUTER_CH_STDOUT, "\nz\n", 3, ROUTER_DIR_RANK_OUTPUT,
	      0, NULL);
	assert_string_equal(mv_new(&m), "\n[d,2]<stdout>: z\n");
	router_reader_close(m.rd);
	h_free(h);
}

/* ---- property: random chunking never puts a tag mid-line --------------- */

#define NR 4

static unsigned long rng_state;

static unsigned rnd(unsigned n)
{
	rng_state = rng_state * 6364136223846793005ul + 1442695040888963407ul;
	return (unsigned)((rng_state >> 33) % n);
}

struct input {
	char text[NR][4096];
	size_t len[NR];
};

static void make_input(struct input *in)
{
	for (int r = 0; r < NR; r++) {
		size_t o = 0;
		int lines = 20 + (int)rnd(30);

		for (int l = 0; l < lines; l++) {
			int n = (int)rnd(40);

			for (int i = 0; i < n; i++)
				in->text[r][o++] = (char)(' ' + rnd(94));
			in->text[r][o++] = '\n';
		}
		if (rnd(2)) /* unterminated last line */
			for (int i = 0; i < 5; i++)
				in->text[r][o++] = 'T';
		in->len[r] = o;
	}
}

/* Deliver @in in random chunks; @interleave picks ranks at random,
 * @timers runs random clock steps + router_run_timers().  Returns the
 * merged view after every rank exited (malloc'd, *len). */
static char *run_chunked(const struct input *in, bool chunk, bool interleave,
			 bool timers, size_t *len)
{
	struct h *h = h_new(NULL);
	struct mv *m = malloc(sizeof(*m));
	size_t pos[NR] = {0};
	char *out;

	for (int r = 0; r < NR; r++)
		h_reg(h, "prop", (uint32_t)r, NR);
	mv_open(h, m, "prop", ROUTER_CH_STDOUT);
	for (int cur = 0;;) {
		int left = 0;

		for (int r = 0; r < NR; r++)
			left += pos[r] < in->len[r];
		if (!left)
			break;
		if (interleave)
			cur = (int)rnd(NR);
		while (pos[cur] == in->len[cur])
			cur = (cur + 1) % NR;
		size_t n = chunk ? 1 + rnd(25) : in->len[cur];

		if (n > in->len[cur] - pos[cur])
			n = in->len[cur] - pos[cur];
		h_put(h, "prop", (uint32_t)cur, ROUTER_CH_STDOUT,
		      in->text[cur] + pos[cur], n, 0, 0, NULL);
		pos[cur] += n;
		if (timers && rnd(4) == 0) {
			h->now += rnd(150) * 1000000ull;
			router_run_timers(h->r);
		}
	}
	for (int r = 0; r < NR; r++)
		router_rank_exit(h->rk[r], ROUTER_STATE_EXITED, 0);
	mv_new(m);
	assert_true(router_reader_eof(m->rd, m->off));
	out = malloc(m->len + 1);
	memcpy(out, m->buf, m->len + 1);
	*len = m->len;
	router_reader_close(m->rd);
	free(m);
	h_free(h);
	return out;
}

/* Parse the view: every line starts with a tag; rebuild each rank's input
 * (": " starts a new line, "+ " continues the rank's previous one). */
static int continuations; /* "+ " tags seen: the timed runs must cut */

static void check_view(const struct input *in, const char *out, size_t len)
{
	char rebuilt[NR][4200];
	size_t rl[NR] = {0};
	const char *p = out, *end = out + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		unsigned r;
		char sep;
		int used = 0;

		assert_non_null(nl);
		assert_int_equal(
		    sscanf(p, "[prop,%u]<stdout>%c%n", &r, &sep, &used), 2);
		assert_true(used > 0 && r < NR);
		assert_int_equal(p[used++], ' ');
		assert_true(sep == ':' || sep == '+');
		if (sep == '+') {
			continuations++;
			/* Undo the "\n" the router added to cut the line. */
			assert_true(rl[r] > 0);
			assert_int_equal(rebuilt[r][rl[r] - 1], '\n');
			rl[r]--;
		}
		memcpy(rebuilt[r] + rl[r], p + used,
		       (size_t)(nl + 1 - (p + used)));
		rl[r] += (size_t)(nl + 1 - (p + used));
		p = nl + 1;
	}
	for (int r = 0; r < NR; r++) {
		size_t want = in->len[r];

		if (want && in->text[r][want - 1] != '\n') {
			/* The flushed last line was ended by the router. */
			assert_int_equal(rl[r], want + 1);
			assert_int_equal(rebuilt[r][want], '\n');
		} else {
			assert_int_equal(rl[r], want);
		}
		assert_memory_equal(rebuilt[r], in->text[r], want);
	}
}

static void property_random_chunking(void **state)
{
	struct input *in = malloc(sizeof(*in));

	(void)state;
	continuations = 0;
	for (int trial = 0; trial < 60; trial++) {
		size_t wl, cl, il, tl;
		char *whole, *chunked, *inter, *timed;

		rng_state = 0x9e3779b97f4a7c15ul * (unsigned long)(trial + 1);
		int c0 = continuations;

		make_input(in);
		whole = run_chunked(in, false, false, false, &wl);
		chunked = run_chunked(in, true, false, false, &cl);
		/* Same input, any chunking: byte-identical view. */
		assert_int_equal(wl, cl);
		assert_memory_equal(whole, chunked, wl);
		check_view(in, whole, wl);
		inter = run_chunked(in, true, true, false, &il);
		check_view(in, inter, il);
		assert_int_equal(il, wl); /* no cuts without timers */
		assert_int_equal(continuations, c0);
		timed = run_chunked(in, true, true, true, &tl);
		check_view(in, timed, tl);
		free(whole);
		free(chunked);
		free(inter);
		free(timed);
	}
	assert_true(continuations > 20);
	free(in);
}

/* While we hold a rank's producer back (its latch is asserted), the rest of
 * its partial line waits in the producer's pipe because of us: the timer
 * does not flush the part, so the line is not split (no "+" continuation).
 * Once the latch is released the line gets a whole period, then the timer
 * flushes as usual. */
static void held_partial_line_is_not_split(void **state)
{
	struct router_config cfg = {.window = 4096, .low_water = 1024};
	struct h *h = h_new(&cfg);
	router_reader_t *rd;
	struct mv m;
	char *b = malloc(5000), *sink = malloc(16384);
	uint64_t off = 0;

	(void)state;
	h_reg(h, "hx", 0, 1);
	mv_open(h, &m, "hx", ROUTER_CH_STDOUT);
	assert_int_equal(router_reader_open(router_job_lookup(h->r, "hx"), 0,
					    ROUTER_CH_STDOUT, 0, NULL, NULL,
					    &rd),
			 0);
	memset(b, 'x', 5000);
	b[4999] = '\n';
	h_put(h, "hx", 0, ROUTER_CH_STDOUT, b, 5000, 0, 0, NULL);
	assert_int_equal(h->fr[0].xoff[ROUTER_CH_STDOUT], 1); /* rd lags */
	(void)mv_new(&m);
	h_puts(h, "hx", 0, "abc");
	h->now += 250 * 1000000ull;
	router_run_timers(h->r);
	assert_string_equal(mv_new(&m), ""); /* held: not flushed */
	h_puts(h, "hx", 0, "def\n");
	assert_string_equal(mv_new(&m), "[hx,0]<stdout>: abcdef\n");
	h_puts(h, "hx", 0, "ghi");
	h->now += 250 * 1000000ull;
	router_run_timers(h->r);
	assert_string_equal(mv_new(&m), "");
	/* the slow reader catches up: XON, and the line gets a whole period
	 * from then for its rest (it was due 10 ms later); then the timer
	 * flushes as usual */
	h->now += 90 * 1000000ull;
	(void)h_drain(rd, &off, sink, 16384);
	assert_int_equal(h->fr[0].xon[ROUTER_CH_STDOUT], 1);
	h->now += 10 * 1000000ull;
	router_run_timers(h->r);
	assert_string_equal(mv_new(&m), "");
	h->now += 90 * 1000000ull;
	router_run_timers(h->r);
	assert_string_equal(mv_new(&m), "[hx,0]<stdout>: ghi");
	router_reader_close(rd);
	router_reader_close(m.rd);
	free(b);
	free(sink);
	h_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(tag_default_and_complete_lines),
	    cmocka_unit_test(partial_line_timer_and_continuation),
	    cmocka_unit_test(loop_timer_flushes),
	    cmocka_unit_test(partial_flushed_at_shutdown),
	    cmocka_unit_test(held_partial_line_is_not_split),
	    cmocka_unit_test(formats),
	    cmocka_unit_test(job_default_directives_and_buffering_size),
	    cmocka_unit_test(property_random_chunking),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
