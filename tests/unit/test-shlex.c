/* SPDX-License-Identifier: Apache-2.0 */
/* /pty-exec's command splitter (agent/parse/shlex.c) against what
 * Python's shlex.split (the reference sidecar's) makes of the same
 * strings, and the op's strict base64 (agent/api/op_pty.c) against
 * base64.b64decode(validate=True). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/api/op_pty.h"
#include "agent/parse/shlex.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void split(const char *in, int want_n, const char *want)
{
	char err[128], *out = NULL;
	int n = bk_shlex_sh(in, &out, err, sizeof(err));
	if (n != want_n || (want && (!out || strcmp(out, want))))
		fail_msg("%s: got %d \"%s\" (%s), want %d \"%s\"", in, n, out ? out : "", n < 0 ? err : "", want_n,
			 want ? want : "");
	free(out);
}

static void error(const char *in, const char *want)
{
	char err[128], *out = NULL;
	int n = bk_shlex_sh(in, &out, err, sizeof(err));
	assert_int_equal(n, -EINVAL);
	assert_string_equal(err, want);
	assert_null(out);
}

static void test_split(void **state)
{
	split("echo one; echo two", 4, "exec 'echo' 'one;' 'echo' 'two'");
	split("  tty  ", 1, "exec 'tty'");
	split("", 0, NULL);
	split(" \t\n", 0, NULL);
	split("a 'b c' \"d e\"", 3, "exec 'a' 'b c' 'd e'");
	split("x\\ y", 1, "exec 'x y'");
	split("it's", -EINVAL, NULL);
	split("\"it's\"", 1, "exec 'it'\\''s'");
	split("\"a\\\"b\\\\c\\d\"", 1, "exec 'a\"b\\c\\d'"); /* shlex: only \" and \\ escape in "" */
	split("'a\\b'", 1, "exec 'a\\b'");
	split("''", 1, "exec ''");
	split("a\"b\"c'd'", 1, "exec 'abcd'");
	split("$(id) `id` $HOME *", 4, "exec '$(id)' '`id`' '$HOME' '*'");
	error("echo \"x", "No closing quotation");
	error("echo 'x", "No closing quotation");
	error("echo x\\", "No escaped character");
	error("echo \"x\\", "No escaped character");
}

static void b64(const char *in, long want_len, const char *want)
{
	unsigned char out[64];
	ssize_t n = bk_pty_b64_decode(in, strlen(in), out);
	if (n != want_len || (n > 0 && memcmp(out, want, (size_t)n)))
		fail_msg("%s: got %zd, want %ld", in, n, want_len);
}

static void test_b64(void **state)
{
	b64("", 0, "");
	b64("aGVsbG8=", 5, "hello");
	b64("aGk=", 2, "hi");
	b64("aGV5", 3, "hey");
	b64("aGk", -1, NULL);       /* Incorrect padding */
	b64("aG=k", -1, NULL);
	b64("a===", -1, NULL);
	b64("aGk=aGk=", -1, NULL);  /* padding only at the end */
	b64("aG k", -1, NULL);      /* validate=True: no other characters */
	b64("!!notbase64", -1, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_b64),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
