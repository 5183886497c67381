/* SPDX-License-Identifier: Apache-2.0 */
/* The grep pattern bounds (agent/parse/rxbound.c): the regex bombs of
 * issue 13 are refused before regcomp sees them, ordinary patterns pass,
 * and what passes compiles in bounded memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <regex.h>
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
	"(a*)*\\1",
	"(a|aa)*\\1b",
	"([a-z]+)\\1",
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
			regex_t re;
			_exit(regcomp(&re, edge[i], REG_EXTENDED | REG_NOSUB) == 0 ? 0 : 1);
		}
		int st;
		assert_int_equal(waitpid(p, &st, 0), p);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail_msg("%s did not compile within 256 MiB", edge[i]);
	}
}

int main(void)
{
	const struct CMUnitTest t[] = {
		cmocka_unit_test(bombs_refused),
		cmocka_unit_test(fine_passes),
		cmocka_unit_test(sizes),
		cmocka_unit_test(at_the_bounds_compiles_small),
	};
	return cmocka_run_group_tests_name("rxbound", t, NULL, NULL);
}
