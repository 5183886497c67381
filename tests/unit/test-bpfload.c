/* SPDX-License-Identifier: Apache-2.0 */
/* The embedded BPF object against the running kernel, one program at a
 * time: it is the kernel's verifier that decides whether boxkite can run
 * here. Per program:
 *
 *   helpers <prog>  every helper the program calls is one its program
 *                   type offers on 5.15 and on 6.1 (the table below, read
 *                   from the kernel's cg_skb_func_proto,
 *                   sock_filter_func_proto, sock_addr_func_proto and
 *                   bpf_base_func_proto; docs/install.md) — no kernel needed
 *   load <prog>     the program loads (its maps are created, the other
 *                   programs are not loaded); on failure the test names
 *                   the verifier's first error line
 *
 * and the whole object loads as the agent loads it, with the events' task
 * info on and off (bk_task_info: the variant a kernel without the helpers
 * in the socket hooks gets). Runs in the unit lane of `make check` on the
 * host, and first in every VM lane (`build/tests/test-bpfload`); the load
 * tests need root (CAP_BPF/CAP_SYS_ADMIN) and are skipped without it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <sys/utsname.h>

#include "agent/isolate/filter.h"
#include "lib/util.h"

#include "boxkite.skel.h"

/* ---- what each program type may call on 5.15 and 6.1 ----------------------- */

/* bpf_base_func_proto (unprivileged part; the ring buffer since 5.8) */
static const int base_helpers[] = {
	BPF_FUNC_map_lookup_elem, BPF_FUNC_map_update_elem, BPF_FUNC_map_delete_elem,
	BPF_FUNC_get_prandom_u32, BPF_FUNC_get_smp_processor_id, BPF_FUNC_tail_call, BPF_FUNC_ktime_get_ns,
	BPF_FUNC_ringbuf_output, BPF_FUNC_ringbuf_reserve, BPF_FUNC_ringbuf_submit, BPF_FUNC_ringbuf_discard,
	BPF_FUNC_ringbuf_query, -1,
};
/* cg_skb_func_proto + sk_filter_func_proto: no helper about the current
 * task (the packet may be sent from any context) */
static const int skb_helpers[] = {
	BPF_FUNC_skb_load_bytes, BPF_FUNC_skb_load_bytes_relative, BPF_FUNC_get_socket_cookie,
	BPF_FUNC_get_socket_uid, BPF_FUNC_perf_event_output, BPF_FUNC_get_local_storage, BPF_FUNC_sk_fullsock,
	BPF_FUNC_skb_cgroup_id, BPF_FUNC_skb_ancestor_cgroup_id,
	/* socket local storage (cg_skb_func_proto: bpf_sk_storage_get_proto) */
	BPF_FUNC_sk_storage_get, -1,
};
/* sock_filter_func_proto and sock_addr_func_proto: process context, so the
 * current task's helpers (since 5.7; cgroup_current_func_proto in 6.1) */
static const int sock_helpers[] = {
	BPF_FUNC_get_current_uid_gid, BPF_FUNC_get_current_pid_tgid, BPF_FUNC_get_current_comm,
	BPF_FUNC_get_current_cgroup_id, BPF_FUNC_get_current_ancestor_cgroup_id, BPF_FUNC_get_socket_cookie,
	BPF_FUNC_get_netns_cookie, BPF_FUNC_perf_event_output, BPF_FUNC_get_local_storage,
	/* socket local storage: sock_filter_func_proto's takes the ctx
	 * (bpf_sk_storage_get_cg_sock_proto), sock_addr_func_proto's ctx->sk */
	BPF_FUNC_sk_storage_get, -1,
};

/* names for the messages (the kernel's "bpf_<name>#<id>") */
#define H(x) { BPF_FUNC_##x, "bpf_" #x }
static const struct {
	int id;
	const char *name;
} names_of[] = {
	H(map_lookup_elem), H(map_update_elem), H(map_delete_elem), H(ktime_get_ns), H(get_prandom_u32),
	H(get_smp_processor_id), H(tail_call), H(get_current_pid_tgid), H(get_current_uid_gid),
	H(get_current_comm), H(skb_load_bytes), H(perf_event_output), H(get_socket_cookie), H(get_socket_uid),
	H(skb_load_bytes_relative), H(skb_cgroup_id), H(get_current_cgroup_id), H(get_local_storage),
	H(skb_ancestor_cgroup_id), H(sk_fullsock), H(get_netns_cookie), H(get_current_ancestor_cgroup_id),
	H(ringbuf_output), H(ringbuf_reserve), H(ringbuf_submit), H(ringbuf_discard), H(ringbuf_query),
	H(sk_storage_get),
};

static const char *helper_name(int id)
{
	for (size_t i = 0; i < ARRAY_SIZE(names_of); i++)
		if (names_of[i].id == id)
			return names_of[i].name;
	return "helper";
}

static bool in_list(const int *l, int id)
{
	for (; *l >= 0; l++)
		if (*l == id)
			return true;
	return false;
}

static bool allowed_5_15(enum bpf_prog_type t, int id)
{
	if (in_list(base_helpers, id))
		return true;
	switch (t) {
	case BPF_PROG_TYPE_CGROUP_SKB: return in_list(skb_helpers, id);
	case BPF_PROG_TYPE_CGROUP_SOCK:
	case BPF_PROG_TYPE_CGROUP_SOCK_ADDR: return in_list(sock_helpers, id);
	default: return false;
	}
}

/* ---- the verifier's log, through libbpf's printer ---------------------------- */

static char *log_text;
static size_t log_len;

static int capture(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level != LIBBPF_WARN)
		return 0;
	va_list cp;
	va_copy(cp, ap);
	int n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n <= 0)
		return 0;
	char *nt = realloc(log_text, log_len + (size_t)n + 1);
	if (!nt)
		return 0;
	log_text = nt;
	vsnprintf(log_text + log_len, (size_t)n + 1, fmt, ap);
	log_len += (size_t)n;
	return 0;
}

static void log_reset(void)
{
	free(log_text);
	log_text = NULL;
	log_len = 0;
}

static void first_error(char *out, size_t len)
{
	char prog[64];
	bk_bpf_load_verdict(log_text, prog, sizeof(prog), out, len);
}

/* ---- the tests ------------------------------------------------------------------- */

static bool can_load(void)
{
	return geteuid() == 0;
}

struct progcase {
	const char *name;
};

static struct bpf_program *find(struct boxkite *s, const char *name)
{
	struct bpf_program *p;
	bpf_object__for_each_program(p, s->obj)
		if (streq(bpf_program__name(p), name))
			return p;
	return NULL;
}

static void test_helpers(void **state)
{
	const char *name = *state;
	struct boxkite *s = boxkite__open();
	assert_non_null(s);
	struct bpf_program *p = find(s, name);
	assert_non_null(p);
	enum bpf_prog_type t = bpf_program__type(p);
	const struct bpf_insn *in = bpf_program__insns(p);
	size_t n = bpf_program__insn_cnt(p);
	char bad[512] = "";
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		if (in[i].code != (BPF_JMP | BPF_CALL) || in[i].src_reg != 0)
			continue; /* not a helper call (BPF-to-BPF and kfunc calls have src_reg set) */
		if (!allowed_5_15(t, in[i].imm) && off < sizeof(bad))
			off += (size_t)snprintf(bad + off, sizeof(bad) - off, " %s#%d", helper_name(in[i].imm), in[i].imm);
	}
	boxkite__destroy(s);
	if (bad[0])
		fail_msg("%s (%s) calls helpers its program type lacks on 5.15/6.1:%s", name,
			 libbpf_bpf_prog_type_str(t), bad);
}

/* Load s (then destroy it): 0, or the verifier's first error in line. */
static int load_once(struct boxkite *s, char *line, size_t n)
{
	log_reset();
	int r = boxkite__load(s);
	boxkite__destroy(s);
	if (r)
		first_error(line, n);
	return r;
}

static void test_load(void **state)
{
	const char *name = *state;
	if (!can_load())
		skip();
	struct boxkite *s = boxkite__open();
	assert_non_null(s);
	struct bpf_program *p;
	bpf_object__for_each_program(p, s->obj)
		bpf_program__set_autoload(p, streq(bpf_program__name(p), name));
	char line[512];
	if (load_once(s, line, sizeof(line))) {
		print_message("%s: %s\n", name, line);
		fail_msg("%s does not load: %s", name, line);
	}
	print_message("%s: ok\n", name);
}

static void load_all(uint32_t task_info)
{
	if (!can_load())
		skip();
	struct boxkite *s = boxkite__open();
	assert_non_null(s);
	s->rodata->bk_task_info = task_info;
	char line[512];
	if (load_once(s, line, sizeof(line)))
		fail_msg("the object does not load (bk_task_info=%u): %s", task_info, line);
}

static void test_load_all(void **state) { load_all(1); }
static void test_load_all_without_task_info(void **state) { load_all(0); }

int main(void)
{
	libbpf_set_print(capture);
	struct utsname u;
	uname(&u);
	print_message("kernel %s\n", u.release);
	static const char *names[] = { "bk_sock_create", "bk_connect4", "bk_connect6", "bk_sendmsg4",
				       "bk_sendmsg6",    "bk_egress",   "bk_recvmsg4", "bk_recvmsg6" };
	static char tname[2][ARRAY_SIZE(names)][64];
	struct CMUnitTest tests[2 * ARRAY_SIZE(names) + 2];
	size_t k = 0;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		snprintf(tname[0][i], sizeof(tname[0][i]), "helpers %s", names[i]);
		tests[k++] = (struct CMUnitTest){ tname[0][i], test_helpers, NULL, NULL, (void *)names[i] };
	}
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		snprintf(tname[1][i], sizeof(tname[1][i]), "load %s", names[i]);
		tests[k++] = (struct CMUnitTest){ tname[1][i], test_load, NULL, NULL, (void *)names[i] };
	}
	tests[k++] = (struct CMUnitTest){ "load the whole object", test_load_all, NULL, NULL, NULL };
	tests[k++] = (struct CMUnitTest){ "load the whole object without task info", test_load_all_without_task_info,
					  NULL, NULL, NULL };
	int r = _cmocka_run_group_tests("bpfload", tests, k, NULL, NULL);
	log_reset();
	return r;
}
