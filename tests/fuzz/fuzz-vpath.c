/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the virtual-path parser and the glob matcher (agent/vpath.c): the
 * path of every file route comes straight from the shim's request body. */
#include "fuzz.h"
#include "agent/parse/vpath.h"

#include <errno.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 80 * 1024)
		return 0;
	const char *in = (const char *)data;
	struct bk_vpath v;
	int e = bk_vpath_parse(in, size, &v);
	CHECK(e == 0 || e == -EINVAL || e == -EILSEQ || e == -ENAMETOOLONG || e == -EPERM, "bk_vpath_parse returned %d",
	      e);
	if (e == 0) {
		CHECK(!memchr(in, '\0', size), "accepted a path with a NUL byte");
		CHECK(v.root < BK_VROOT_N, "root %d", (int)v.root);
		CHECK(v.writable == bk_vroots[v.root].writable, "writable flag disagrees with the root");
		CHECK(fuzz_terminated(v.rel, sizeof(v.rel)) && fuzz_terminated(v.abs, sizeof(v.abs)), "unterminated");
		/* the normalised forms never climb out and never hold empty, . or .. parts */
		CHECK(v.rel[0] && v.rel[0] != '/', "rel \"%s\"", v.rel);
		if (!bk_vpath_is_root(&v)) {
			char buf[BK_VPATH_MAX + 1];
			memcpy(buf, v.rel, strlen(v.rel) + 1);
			for (char *sv = NULL, *c = strtok_r(buf, "/", &sv); c; c = strtok_r(NULL, "/", &sv))
				CHECK(strcmp(c, ".") && strcmp(c, ".."), "rel \"%s\" holds a dot component", v.rel);
			CHECK(!strstr(v.rel, "//"), "rel \"%s\" has an empty component", v.rel);
		}
		size_t rl = strlen(bk_vroots[v.root].path);
		CHECK(strncmp(v.abs, bk_vroots[v.root].path, rl) == 0 && (v.abs[rl] == '\0' || v.abs[rl] == '/'),
		      "abs \"%s\" is not under its root %s", v.abs, bk_vroots[v.root].path);
		/* the normalised form, as the file helper reads it, gives the same answer */
		struct bk_vpath w;
		CHECK(bk_vpath_parse_abs(v.abs, strlen(v.abs), false, &w) == 0 && w.root == v.root && !strcmp(w.rel, v.rel),
		      "normalised path \"%s\" does not parse to itself", v.abs);
		CHECK(v.root != BK_VROOT_MNT, "a file route's path in the /mnt hierarchy: %s", v.abs);
	}
	/* /ls: the same, plus the /mnt hierarchy, never anywhere else */
	struct bk_vpath l;
	e = bk_vpath_parse_ls(in, size, &l);
	if (e == 0) {
		size_t rl = strlen(bk_vroots[l.root].path);
		CHECK(strncmp(l.abs, bk_vroots[l.root].path, rl) == 0 && (l.abs[rl] == '\0' || l.abs[rl] == '/'),
		      "ls abs \"%s\" is not under its root", l.abs);
		CHECK(!l.writable || l.root != BK_VROOT_MNT, "a writable /mnt");
		struct bk_vpath w;
		CHECK(bk_vpath_parse_abs(l.abs, strlen(l.abs), true, &w) == 0 && w.root == l.root && !strcmp(w.rel, l.rel),
		      "ls path \"%s\" does not parse to itself", l.abs);
	}
	/* glob: split the input into pattern and path at the first NUL-free tab */
	char *copy = malloc(size + 1);
	memcpy(copy, data, size);
	copy[size] = '\0';
	if (strlen(copy) == size) {
		char *tab = strchr(copy, '\t');
		if (tab) {
			*tab = '\0';
			if (bk_glob_check(copy) == 0) {
				(void)bk_glob_match(copy, tab + 1);
				(void)bk_glob_match_rglob(copy, tab + 1);
				(void)bk_glob_deeper(copy, 3);
				char base[4200];
				(void)bk_glob_split_abs(copy, base, sizeof(base));
			}
		}
	}
	free(copy);
	return 0;
}
