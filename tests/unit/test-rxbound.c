/* SPDX-License-Identifier: Apache-2.0 */
/* The grep pattern bounds (agent/parse/rxbound.c): the regex bombs of
 * issue 13 are refused before PCRE2 sees them, ordinary (Python re)
 * patterns pass, what passes compiles in bounded memory, and what
 * backtracks is stopped by the match limits the file helper sets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/parse/rxbound.h"

static const char *const bombs[] = {
	"(((a{1,255}){1,255}){1,255})",
	"((a{1,255}){1,255})",
	"(a{1,100}){1,100}",
	"(.{0,2000}){2}",
	"a{2001}",
	"(a?){4000}",
	"((((a+)+)+)+)",
	"((((a*)*)*)*)b",
	"((((((((((((((((((((((((((((((((((a))))))))))))))))))))))))))))))))))",
	"((a{10}){10}){30}",
	"(a{1,255}){1,40}",
	"(x+x+)+y{100}{100}",
};

static const char *const fine[] = {
	"TODO (one|two)",
	"^\\s*def [a-z_]+\\(",
	"[[:alpha:]]{1,255}",
	"[a-z]{1,255}[0-9]{1,255}",
	"(a|b)*c",
	"((a+)+)+",
	"\\w{3,40}@[a-z0-9.-]+\\.[a-z]{2,10}",
	"[]{}()*+?]{1,9}",
	"a{,10}",
	"(unclosed",
	"x{1,",
	"\\",
	"[",
	")",
	".{0,2000}",
	/* Python's re: backreferences (bounded by the match limits), lazy
	 * and possessive marks, inline flags, named groups */
	"(a*)*\\1",
	"([a-z]+)\\1",
	"(?i)todo",
	"\\d{3}-\\d{4}",
	"(?P<word>\\w+) (?P=word)",
	"((.*?)+?)+?",
	"(?:a|b)+?c",
	"(?<=x)y(?!z)",
};

static void bombs_refused(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bombs) / sizeof(bombs[0]); i++) {
		char err[256] = "";
		int r = bk_rx_check(bombs[i], err, sizeof(err));
		if (r != -E2BIG)
			fail_msg("bomb %s was not refused", bombs[i]);
		assert_true(err[0] != '\0');
	}
}

static void fine_passes(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++) {
		char err[256] = "";
		if (bk_rx_check(fine[i], err, sizeof(err)) != 0)
			fail_msg("%s refused: %s", fine[i], err);
	}
}

static void sizes(void **state)
{
	(void)state;
	struct bk_rx_cost c;
	bk_rx_measure("abc", &c);
	assert_int_equal(c.size, 3);
	assert_int_equal(c.nest, 0);
	bk_rx_measure("(a{1,255}){1,255}", &c);
	assert_int_equal(c.size, 255 * 255);
	assert_int_equal(c.nest, 2);
	bk_rx_measure("a+", &c);
	assert_int_equal(c.size, 2);
	bk_rx_measure("a{3,}", &c);
	assert_int_equal(c.size, 4);
	bk_rx_measure("(((a{1,255}){1,255}){1,255}){1,255}{1,255}{1,255}{1,255}", &c);
	assert_true(c.size > (1ull << 39)); /* saturates, never wraps */
	bk_rx_measure("[a{1,255}]", &c);
	assert_int_equal(c.size, 1);
	char *long_pat = malloc(BK_RX_LEN_MAX + 2);
	assert_non_null(long_pat);
	memset(long_pat, 'a', BK_RX_LEN_MAX + 1);
	long_pat[BK_RX_LEN_MAX + 1] = '\0';
	char err[128];
	assert_int_equal(bk_rx_check(long_pat, err, sizeof(err)), -E2BIG);
	free(long_pat);
}

/* Patterns at the bounds compile within 256 MiB of address space. */
static void at_the_bounds_compiles_small(void **state)
{
	(void)state;
	static const char *const edge[] = { "(a?){2000}", "(a|b?){666}", "((a?){40}){50}", ".{0,2000}",
					     "((.?){10}){10}(.?){1000}" };
	for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++) {
		char err[256];
		if (bk_rx_check(edge[i], err, sizeof(err)) != 0)
			fail_msg("%s refused: %s", edge[i], err);
		pid_t p = fork();
		assert_true(p >= 0);
		if (p == 0) {
			struct rlimit rl = { 256u << 20, 256u << 20 };
			struct rlimit cur;
			getrlimit(RLIMIT_AS, &cur);
			/* sanitizer builds map their shadow first: leave room above it */
			FILE *f = fopen("/proc/self/statm", "r");
			unsigned long pages = 0;
			if (f && fscanf(f, "%lu", &pages) == 1)
				rl.rlim_cur = rl.rlim_max = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (256u << 20);
			if (f)
				fclose(f);
			setrlimit(RLIMIT_AS, &rl);
			char pat[4096];
			int ec;
			PCRE2_SIZE eo;
			if (bk_rx_translate(edge[i], pat, sizeof(pat)) < 0)
				_exit(2);
			_exit(pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo,
					    NULL) ? 0 : 1);
		}
		int st;
		assert_int_equal(waitpid(p, &st, 0), p);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail_msg("%s did not compile within 256 MiB", edge[i]);
	}
}

/* Python's syntax in PCRE2's words. */
static void translate(void **state)
{
	(void)state;
	static const char *const t[][2] = {
		{ "abc\\Z", "abc\\z" },	     { "a{,3}", "a{0,3}" },	   { "a{,}", "a{,}" },
		{ "[\\Z]", "[\\Z]" },	     { "\\u00e9", "\\x{00e9}" },	   { "\\U0001F600", "\\x{0001F600}" },
		{ "[]{,3}]", "[]{,3}]" },	     { "\\\\Z", "\\\\Z" },	   { "(?i)\\d+", "(?i)\\d+" },
		{ "\\u12", "\\u12" },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char out[64];
		assert_int_equal(bk_rx_translate(t[i][0], out, sizeof(out)), 0);
		if (strcmp(out, t[i][1]) != 0)
			fail_msg("%s became %s, not %s", t[i][0], out, t[i][1]);
	}
	char small[4];
	assert_int_equal(bk_rx_translate("abcdef", small, sizeof(small)), -E2BIG);
}

/* A pattern within the bounds that backtracks exponentially stops at the
 * helper's match limit, at once. */
static void backtracking_stops_at_the_limit(void **state)
{
	(void)state;
	/* the subjects hold what the pattern requires (PCRE2 looks for a
	 * required last character first) but never match */
	static const char *const slow[][2] = {
		{ "(x+x+)+y", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx!y" },
		{ "(a|aa)*\\1b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!b" },
		{ "^(\\w+\\s?)+$", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!" },
	};
	for (size_t i = 0; i < sizeof(slow) / sizeof(slow[0]); i++) {
		char err[256];
		if (bk_rx_check(slow[i][0], err, sizeof(err)) != 0)
			fail_msg("%s refused: %s", slow[i][0], err);
		int ec;
		PCRE2_SIZE eo;
		pcre2_code *re =
			pcre2_compile((PCRE2_SPTR)slow[i][0], PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
		assert_non_null(re);
		pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
		pcre2_match_context *mc = pcre2_match_context_create(NULL);
		pcre2_set_match_limit(mc, 1000000); /* GREP_MATCH_LIMIT */
		pcre2_set_depth_limit(mc, 10000);
		const char *s = slow[i][1];
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		int rc = pcre2_match(re, (PCRE2_SPTR)s, strlen(s), 0, 0, md, mc);
		clock_gettime(CLOCK_MONOTONIC, &b);
		double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
		if (rc != PCRE2_ERROR_MATCHLIMIT && rc != PCRE2_ERROR_DEPTHLIMIT)
			fail_msg("%s: pcre2_match returned %d, not the match limit", slow[i][0], rc);
		if (ms > 2000)
			fail_msg("%s took %.0f ms", slow[i][0], ms);
		pcre2_match_data_free(md);
		pcre2_match_context_free(mc);
		pcre2_code_free(re);
	}
}

int main(void)
{
	const struct CMUnitTest t[] = {
		cmocka_unit_test(bombs_refused),
		cmocka_unit_test(fine_passes),
		cmocka_unit_test(sizes),
		cmocka_unit_test(at_the_bounds_compiles_small),
		cmocka_unit_test(translate),
		cmocka_unit_test(backtracking_stops_at_the_limit),
	};
	return cmocka_run_group_tests_name("rxbound", t, NULL, NULL);
}
