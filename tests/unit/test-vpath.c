/* SPDX-License-Identifier: Apache-2.0 */
/* Virtual paths (agent/vpath.c): traversal refusals and normalisation, one
 * cmocka test per case so a failure names its input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/files/files.h"
#include "lib/util.h"
#include "agent/parse/vpath.h"

struct pcase {
	const char *name; /* test name (the input, printable) */
	const char *in;
	size_t len;       /* 0: strlen(in) */
	int want;         /* 0 or -errno */
	enum bk_vroot root;
	const char *rel;
	const char *abs;
	bool writable;
};

#define OK(in_, root_, rel_, abs_, w_) { in_, in_, 0, 0, root_, rel_, abs_, w_ }
#define BAD(in_, err_) { in_, in_, 0, err_, 0, NULL, NULL, false }

static const struct pcase cases[] = {
	/* relative paths are below /workspace */
	OK("a.txt", BK_VROOT_WORKSPACE, "a.txt", "/workspace/a.txt", true),
	OK("dir/sub/f.py", BK_VROOT_WORKSPACE, "dir/sub/f.py", "/workspace/dir/sub/f.py", true),
	OK(".", BK_VROOT_WORKSPACE, ".", "/workspace", true),
	OK("./a//b/./c", BK_VROOT_WORKSPACE, "a/b/c", "/workspace/a/b/c", true),
	OK("a/b/../c", BK_VROOT_WORKSPACE, "a/c", "/workspace/a/c", true),
	OK("a/..", BK_VROOT_WORKSPACE, ".", "/workspace", true),
	/* the reference's mapping (sidecar_paths.py _normalize_input_path) */
	OK("workspace/x", BK_VROOT_WORKSPACE, "x", "/workspace/x", true),
	OK("workspace/workspace/x", BK_VROOT_WORKSPACE, "workspace/x", "/workspace/workspace/x", true),
	OK("workspace", BK_VROOT_WORKSPACE, ".", "/workspace", true),
	OK("/", BK_VROOT_WORKSPACE, ".", "/workspace", true),
	OK("  a.txt \n", BK_VROOT_WORKSPACE, "a.txt", "/workspace/a.txt", true),
	OK("/outputs/r.pdf", BK_VROOT_OUTPUTS, "r.pdf", "/mnt/user-data/outputs/r.pdf", true),
	OK("/outputs", BK_VROOT_OUTPUTS, ".", "/mnt/user-data/outputs", true),
	OK("/uploads/in.csv", BK_VROOT_UPLOADS, "in.csv", "/mnt/user-data/uploads/in.csv", false),
	OK("/skills/pdf/SKILL.md", BK_VROOT_SKILLS, "pdf/SKILL.md", "/mnt/skills/pdf/SKILL.md", false),
	OK("/outputs//a", BK_VROOT_OUTPUTS, "a", "/mnt/user-data/outputs/a", true),
	OK("\\workspace\\a", BK_VROOT_WORKSPACE, "a", "/workspace/a", true),
	BAD("/outputsx/a", -EPERM),
	BAD("/outputs/../../etc", -EPERM),
	BAD("/skills/../../etc", -EPERM),
	BAD("   ", -EINVAL),
	OK("%2e%2e/etc/passwd", BK_VROOT_WORKSPACE, "%2e%2e/etc/passwd", "/workspace/%2e%2e/etc/passwd", true),
	OK("..%2fetc", BK_VROOT_WORKSPACE, "..%2fetc", "/workspace/..%2fetc", true),
	OK("...", BK_VROOT_WORKSPACE, "...", "/workspace/...", true),
	OK("..a/b..", BK_VROOT_WORKSPACE, "..a/b..", "/workspace/..a/b..", true),
	BAD("a\\..\\..\\etc", -EPERM), /* '\\' is '/' */
	OK("~/x", BK_VROOT_WORKSPACE, "~/x", "/workspace/~/x", true),
	/* absolute paths under each root */
	OK("/workspace", BK_VROOT_WORKSPACE, ".", "/workspace", true),
	OK("/workspace/", BK_VROOT_WORKSPACE, ".", "/workspace", true),
	OK("//workspace//a", BK_VROOT_WORKSPACE, "a", "/workspace/a", true),
	OK("/./workspace/./a", BK_VROOT_WORKSPACE, "a", "/workspace/a", true),
	OK("/mnt/user-data/outputs/r.pdf", BK_VROOT_OUTPUTS, "r.pdf", "/mnt/user-data/outputs/r.pdf", true),
	OK("/mnt/user-data/uploads/in.csv", BK_VROOT_UPLOADS, "in.csv", "/mnt/user-data/uploads/in.csv", false),
	OK("/mnt/skills/pdf/SKILL.md", BK_VROOT_SKILLS, "pdf/SKILL.md", "/mnt/skills/pdf/SKILL.md", false),
	OK("/tmp/x", BK_VROOT_TMP, "x", "/tmp/x", true),
	OK("/tmp", BK_VROOT_TMP, ".", "/tmp", true),
	OK("/tmp/a/../b", BK_VROOT_TMP, "b", "/tmp/b", true),
	/* traversal and outside the roots */
	BAD("..", -EPERM),
	BAD("../etc/passwd", -EPERM),
	BAD("a/../../etc/passwd", -EPERM),
	BAD("./../x", -EPERM),
	BAD("/workspace/..", -EPERM),
	BAD("/workspace/../etc/shadow", -EPERM),
	BAD("/workspace/a/../../etc", -EPERM),
	BAD("/workspace/../workspace/x", -EPERM), /* leaving, even to come back */
	BAD("/tmp/../tmp/x", -EPERM),
	BAD("/mnt/user-data/outputs/../uploads/x", -EPERM),
	BAD("/mnt/user-data/../user-data/outputs/x", -EPERM),
	BAD("/../workspace/x", -EPERM),
	BAD("/etc/passwd", -EPERM),
	BAD("/etc/shadow", -EPERM),
	BAD("//", -EPERM), /* only "/" itself is the workspace, as in the reference */
	BAD("/mnt", -EPERM),
	BAD("/mnt/user-data", -EPERM),
	BAD("/mnt/user-data/other", -EPERM),
	BAD("/mnt/skillsX/a", -EPERM),
	BAD("/workspacex", -EPERM),
	BAD("/workspace2/a", -EPERM),
	BAD("/tmpfoo", -EPERM),
	BAD("/proc/self/root/etc/shadow", -EPERM),
	BAD("/proc/1/root/workspace/x", -EPERM),
	BAD("/run/secrets/boxkite/token", -EPERM),
	BAD("/opt/boxkite/boxkite-shim", -EPERM),
	BAD("/%2e%2e/etc", -EPERM),
	BAD("/WORKSPACE/a", -EPERM),
	BAD("/dev/null", -EPERM),
	/* malformed */
	BAD("", -EINVAL),
	{ "NUL inside", "a\0/../../etc", 12, -EILSEQ, 0, NULL, NULL, false },
	{ "NUL at end", "/workspace/a\0", 13, -EILSEQ, 0, NULL, NULL, false },
};

static void run_case(void **state)
{
	const struct pcase *c = *state;
	struct bk_vpath vp;
	size_t len = c->len ? c->len : strlen(c->in);
	int r = bk_vpath_parse(c->in, len, &vp);
	assert_int_equal(r, c->want);
	if (r == 0) {
		assert_int_equal(vp.root, c->root);
		assert_string_equal(vp.rel, c->rel);
		assert_string_equal(vp.abs, c->abs);
		assert_int_equal(vp.writable, c->writable);
	}
}

static void long_paths(void **state)
{
	struct bk_vpath vp;
	char *p = malloc(70000);
	assert_non_null(p);
	/* 64 KB */
	memset(p, 'a', 65536);
	for (size_t i = 100; i < 65536; i += 100)
		p[i] = '/';
	assert_int_equal(bk_vpath_parse(p, 65536, &vp), -ENAMETOOLONG);
	/* exactly 4096 bytes is fine, 4097 is not */
	memcpy(p, "/workspace/", 11);
	memset(p + 11, 'b', 4096 - 11);
	for (size_t i = 100; i < 4096; i += 100)
		p[i] = '/';
	assert_int_equal(bk_vpath_parse(p, 4096, &vp), 0);
	p[4096] = 'c';
	assert_int_equal(bk_vpath_parse(p, 4097, &vp), -ENAMETOOLONG);
	/* a component over 255 bytes */
	memset(p + 11, 'd', 300);
	assert_int_equal(bk_vpath_parse(p, 311, &vp), -ENAMETOOLONG);
	memset(p + 11, 'd', 255);
	assert_int_equal(bk_vpath_parse(p, 266, &vp), 0);
	/* 601 ".." after 600 names climb one above the root */
	size_t o = 0;
	memcpy(p, "/tmp", 4);
	o = 4;
	for (int i = 0; i < 600; i++) {
		memcpy(p + o, "/a", 2);
		o += 2;
	}
	for (int i = 0; i < 600; i++) {
		memcpy(p + o, "/..", 3);
		o += 3;
	}
	assert_int_equal(bk_vpath_parse(p, o, &vp), 0);
	assert_string_equal(vp.abs, "/tmp");
	for (int i = 0; i < 1; i++) {
		memcpy(p + o, "/..", 3);
		o += 3;
	}
	assert_int_equal(bk_vpath_parse(p, o, &vp), -EPERM);
	/* many empty components collapse */
	memset(p, '/', 4000);
	memcpy(p + 4000, "tmp/x", 5);
	assert_int_equal(bk_vpath_parse(p, 4005, &vp), 0);
	assert_string_equal(vp.abs, "/tmp/x");
	free(p);
}

static void trailing_slash(void **state)
{
	struct bk_vpath vp;
	assert_int_equal(bk_vpath_parse("a/b/", 4, &vp), 0);
	assert_true(vp.trailing_slash);
	assert_string_equal(vp.rel, "a/b");
	assert_int_equal(bk_vpath_parse("a/b", 3, &vp), 0);
	assert_false(vp.trailing_slash);
	assert_int_equal(bk_vpath_parse("a/.", 3, &vp), 0);
	assert_true(vp.trailing_slash);
}

static void split_join(void **state)
{
	char dir[64], out[64];
	const char *base;
	assert_int_equal(bk_vpath_split("a/b/c", dir, sizeof(dir), &base), 0);
	assert_string_equal(dir, "a/b");
	assert_string_equal(base, "c");
	assert_int_equal(bk_vpath_split("c", dir, sizeof(dir), &base), 0);
	assert_string_equal(dir, ".");
	assert_string_equal(base, "c");
	assert_int_equal(bk_vpath_split("aaaa/b", dir, 3, &base), -ENAMETOOLONG);
	assert_int_equal(bk_vpath_join("/workspace", "x/y", out, sizeof(out)), 0);
	assert_string_equal(out, "/workspace/x/y");
	assert_int_equal(bk_vpath_join("/workspace", "", out, sizeof(out)), 0);
	assert_string_equal(out, "/workspace");
	assert_int_equal(bk_vpath_join("/workspace", "x", out, 8), -ENAMETOOLONG);
}

static void glob_check(void **state)
{
	assert_int_equal(bk_glob_check("*.py"), 0);
	assert_int_equal(bk_glob_check("**/*.c"), 0);
	assert_int_equal(bk_glob_check("src/./x"), 0);
	assert_int_equal(bk_glob_check(""), -EINVAL);
	assert_int_equal(bk_glob_check("/etc/*"), -EINVAL);
	assert_int_equal(bk_glob_check("../*"), -EPERM);
	assert_int_equal(bk_glob_check("a/../../b"), -EPERM);
	assert_int_equal(bk_glob_check("**/.."), -EPERM);
	char big[BK_GLOB_MAX + 2];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(bk_glob_check(big), -ENAMETOOLONG);
	/* too many segments */
	char segs[200];
	for (int i = 0; i < 99; i++) {
		segs[2 * i] = 'a';
		segs[2 * i + 1] = '/';
	}
	segs[198] = 'a';
	segs[199] = '\0';
	assert_int_equal(bk_glob_check(segs), -ENAMETOOLONG);
}

static void glob_match(void **state)
{
	assert_true(bk_glob_match("*.py", "a.py"));
	assert_false(bk_glob_match("*.py", "src/a.py"));
	assert_false(bk_glob_match("*.py", ".hidden.py"));
	assert_true(bk_glob_match(".*.py", ".hidden.py"));
	assert_true(bk_glob_match("**/*.py", "a.py"));
	assert_true(bk_glob_match("**/*.py", "src/deep/er/a.py"));
	assert_false(bk_glob_match("**/*.py", ".git/a.py"));
	assert_true(bk_glob_match("src/**", "src/a/b"));
	assert_true(bk_glob_match("src/**", "src"));
	assert_true(bk_glob_match("src/*/x.c", "src/lib/x.c"));
	assert_false(bk_glob_match("src/*/x.c", "src/lib/sub/x.c"));
	assert_true(bk_glob_match("a/**/b/**/c", "a/x/b/y/z/c"));
	assert_true(bk_glob_match("[ab]?.txt", "b1.txt"));
	assert_false(bk_glob_match("*", "a/b"));
	/* many "**" against a deep path stays polynomial */
	char pat[256] = "", path[512] = "";
	for (int i = 0; i < 30; i++)
		strcat(pat, "**/");
	strcat(pat, "nomatch");
	for (int i = 0; i < 100; i++)
		strcat(path, "d/");
	strcat(path, "f");
	assert_false(bk_glob_match(pat, path));
	assert_true(bk_glob_deeper("**/x", 5));
	assert_true(bk_glob_deeper("a/b/c", 2));
	assert_false(bk_glob_deeper("a/b/c", 3));
}

static void glob_split(void **state)
{
	char base[128];
	const char *rest = bk_glob_split_abs("/workspace/src/**/*.c", base, sizeof(base));
	assert_non_null(rest);
	assert_string_equal(base, "/workspace/src");
	assert_string_equal(rest, "**/*.c");
	rest = bk_glob_split_abs("/workspace/*.py", base, sizeof(base));
	assert_string_equal(base, "/workspace");
	assert_string_equal(rest, "*.py");
	rest = bk_glob_split_abs("/tmp/exact.txt", base, sizeof(base));
	assert_string_equal(base, "/tmp");
	assert_string_equal(rest, "exact.txt");
	rest = bk_glob_split_abs("/*", base, sizeof(base));
	assert_string_equal(base, "/");
	assert_string_equal(rest, "*");
	assert_null(bk_glob_split_abs("/workspace/abc/*", base, 5));
}

static void mime(void **state)
{
	assert_string_equal(bk_mime_type("/mnt/user-data/outputs/r.PDF"), "application/pdf");
	assert_string_equal(bk_mime_type("a.tar.gz"), "application/gzip");
	assert_string_equal(bk_mime_type("notes.md"), "text/markdown");
	assert_string_equal(bk_mime_type("Makefile"), "application/octet-stream");
	assert_string_equal(bk_mime_type(".bashrc"), "application/octet-stream");
	assert_string_equal(bk_mime_type("dir.d/x"), "application/octet-stream");
	assert_string_equal(bk_mime_type("x."), "application/octet-stream");
}

/* /ls may list the /mnt hierarchy (the reference's _ls_allowed_roots). */
static void ls_paths(void **state)
{
	struct bk_vpath vp;
	assert_int_equal(bk_vpath_parse_ls("/mnt", 4, &vp), 0);
	assert_int_equal(vp.root, BK_VROOT_MNT);
	assert_string_equal(vp.abs, "/mnt");
	assert_false(vp.writable);
	assert_int_equal(bk_vpath_parse_ls("/mnt/user-data", 14, &vp), 0);
	assert_int_equal(vp.root, BK_VROOT_MNT);
	assert_string_equal(vp.rel, "user-data");
	assert_int_equal(bk_vpath_parse_ls("/mnt/skills/x", 13, &vp), 0);
	assert_int_equal(vp.root, BK_VROOT_SKILLS);
	assert_int_equal(bk_vpath_parse_ls("/", 1, &vp), 0);
	assert_int_equal(vp.root, BK_VROOT_WORKSPACE);
	assert_int_equal(bk_vpath_parse_ls("/mnt/..", 7, &vp), -EPERM);
	assert_int_equal(bk_vpath_parse_ls("/etc", 4, &vp), -EPERM);
	assert_int_equal(bk_vpath_parse("/mnt", 4, &vp), -EPERM);
	/* the real-path parse: no mapping, no aliases */
	assert_int_equal(bk_vpath_parse_abs("/outputs/x", 10, false, &vp), -EPERM);
	assert_int_equal(bk_vpath_parse_abs("/", 1, false, &vp), -EPERM);
	assert_int_equal(bk_vpath_parse_abs("x", 1, false, &vp), -EPERM);
	assert_int_equal(bk_vpath_parse_abs("/workspace/ x ", 14, false, &vp), 0);
	assert_string_equal(vp.rel, " x ");
	assert_int_equal(bk_vpath_parse_abs("/mnt/x", 6, true, &vp), 0);
	assert_int_equal(vp.root, BK_VROOT_MNT);
	assert_int_equal(bk_vpath_parse_abs("/mnt/x", 6, false, &vp), -EPERM);
}

/* Path.rglob(pattern), as the reference's /glob. */
static void rglob_match(void **state)
{
	assert_true(bk_glob_match_rglob("*.py", "a.py"));
	assert_true(bk_glob_match_rglob("*.py", "src/deep/a.py"));
	assert_true(bk_glob_match_rglob("*.py", ".hidden.py"));
	assert_true(bk_glob_match_rglob("*.py", ".git/a.py"));
	assert_true(bk_glob_match_rglob("src/*.py", "x/src/a.py"));
	assert_false(bk_glob_match_rglob("src/*.py", "src/x/a.py"));
	assert_true(bk_glob_match_rglob("**/*.c", "a/b/c.c"));
	assert_false(bk_glob_match_rglob("**", "a/b"));
	assert_false(bk_glob_match_rglob("a/**", "a/b"));
	assert_true(bk_glob_match_rglob("a\\b", "a\\b")); /* '\\' is literal */
	assert_false(bk_glob_match_rglob("*.py", "a.pyc"));
}

int main(void)
{
	size_t n = ARRAY_SIZE(cases);
	struct CMUnitTest *t = calloc(n + 10, sizeof(*t));
	if (!t)
		return 1;
	for (size_t i = 0; i < n; i++) {
		t[i].name = cases[i].name;
		t[i].test_func = run_case;
		t[i].initial_state = (void *)&cases[i];
	}
	const struct CMUnitTest more[] = {
		cmocka_unit_test(long_paths), cmocka_unit_test(trailing_slash), cmocka_unit_test(split_join),
		cmocka_unit_test(glob_check), cmocka_unit_test(glob_match),	cmocka_unit_test(glob_split),
		cmocka_unit_test(mime),		cmocka_unit_test(ls_paths),	cmocka_unit_test(rglob_match),
	};
	memcpy(t + n, more, sizeof(more));
	int r = _cmocka_run_group_tests("vpath", t, n + ARRAY_SIZE(more), NULL, NULL);
	free(t);
	return r;
}
