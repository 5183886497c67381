/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/caller/identity.h"
#include "lib/util.h"

#define UID "0a1b2c3d-4e5f-6789-abcd-ef0123456789"
#define UIDU "0a1b2c3d_4e5f_6789_abcd_ef0123456789"
#define CID "3f1e9c0d2b7a4e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f"

static void cgroupfs_layouts(void **st)
{
	struct bk_pod_ref r;
	assert_int_equal(bk_cgroup_path_parse("/kubepods/besteffort/pod" UID "/" CID, &r), 0);
	assert_string_equal(r.pod_uid, UID);
	assert_string_equal(r.container_id, CID);
	assert_string_equal(r.qos, "besteffort");
	assert_string_equal(r.pod_path, "/kubepods/besteffort/pod" UID);
	assert_int_equal(r.layout, BK_LAYOUT_CGROUPFS);

	assert_int_equal(bk_cgroup_path_parse("/kubepods/burstable/pod" UID "/" CID, &r), 0);
	assert_string_equal(r.qos, "burstable");
	/* guaranteed pods have no qos level */
	assert_int_equal(bk_cgroup_path_parse("/kubepods/pod" UID "/" CID, &r), 0);
	assert_string_equal(r.qos, "");
	assert_string_equal(r.pod_path, "/kubepods/pod" UID);
	/* not anchored: the agent may sit in its own cgroup namespace */
	assert_int_equal(bk_cgroup_path_parse("/../../kubepods/pod" UID "/" CID, &r), 0);
	assert_int_equal(bk_cgroup_path_parse("/some/prefix/kubepods/besteffort/pod" UID "/abc", &r), 0);
	assert_string_equal(r.container_id, "abc");
}

static void systemd_layouts(void **st)
{
	struct bk_pod_ref r;
	assert_int_equal(bk_cgroup_path_parse("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UIDU
					      ".slice/cri-containerd-" CID ".scope",
					      &r),
			 0);
	assert_string_equal(r.pod_uid, UID);
	assert_string_equal(r.container_id, CID);
	assert_string_equal(r.qos, "besteffort");
	assert_int_equal(r.layout, BK_LAYOUT_SYSTEMD);
	assert_int_equal(bk_cgroup_path_parse("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UIDU
					      ".slice/crio-" CID ".scope",
					      &r),
			 0);
	assert_string_equal(r.qos, "burstable");
	assert_int_equal(bk_cgroup_path_parse("/kubepods.slice/kubepods-pod" UIDU ".slice/cri-containerd-" CID ".scope",
					      &r),
			 0);
	assert_string_equal(r.qos, "");
	assert_string_equal(r.pod_path, "/kubepods.slice/kubepods-pod" UIDU ".slice");
}

static void refused_paths(void **st)
{
	struct bk_pod_ref r;
	/* not pods */
	assert_int_equal(bk_cgroup_path_parse("/", &r), -ENOENT);
	assert_int_equal(bk_cgroup_path_parse("", &r), -ENOENT);
	assert_int_equal(bk_cgroup_path_parse("/user.slice/user-0.slice/session-1.scope", &r), -ENOENT);
	assert_int_equal(bk_cgroup_path_parse("/system.slice/containerd.service", &r), -ENOENT);
	/* the pod level itself is no container */
	assert_int_equal(bk_cgroup_path_parse("/kubepods/besteffort/pod" UID, &r), -ENOENT);
	assert_int_equal(bk_cgroup_path_parse("/kubepods.slice/kubepods-pod" UIDU ".slice", &r), -ENOENT);
	/* malformed */
	assert_int_equal(bk_cgroup_path_parse("/kubepods/besteffort/pod0a1b/" CID, &r), -EINVAL);
	assert_int_equal(bk_cgroup_path_parse("/kubepods/besteffort/podzz1b2c3d-4e5f-6789-abcd-ef0123456789/x", &r),
			 -EINVAL);
	assert_int_equal(bk_cgroup_path_parse("/kubepods/besteffort/pod" UID "/" CID "/nested", &r), -EINVAL);
	assert_int_equal(bk_cgroup_path_parse("/kubepods/besteffort/pod" UID "/.hidden", &r), -EINVAL);
	assert_int_equal(bk_cgroup_path_parse("/kubepods.slice/kubepods-pod" UIDU ".slice/crio-conmon-" CID ".scope",
					      &r),
			 -EINVAL);
	assert_int_equal(bk_cgroup_path_parse("/kubepods.slice/kubepods-pod" UIDU ".slice/session-3.scope", &r),
			 -EINVAL);
	assert_int_equal(bk_cgroup_path_parse("/kubepods.slice/kubepods-pod" UIDU ".slice/cri-containerd-.scope", &r),
			 -EINVAL);
	assert_int_equal(bk_cgroup_path_parse("/kubepods/besteffort/pod" UID "/a b", &r), -EINVAL);
	/* a container ID longer than any runtime writes */
	char longp[600];
	snprintf(longp, sizeof(longp), "/kubepods/pod" UID "/%0200d", 7);
	assert_int_equal(bk_cgroup_path_parse(longp, &r), -EINVAL);
	/* an overlong path */
	char *huge = malloc(8192);
	memset(huge, 'a', 8191);
	huge[8191] = '\0';
	assert_int_equal(bk_cgroup_path_parse(huge, &r), -EINVAL);
	free(huge);
}

static void proc_cgroup_files(void **st)
{
	struct bk_pod_ref r;
	/* hybrid host: v1 lines and a v2 line that all agree */
	const char *hybrid = "12:pids:/kubepods/besteffort/pod" UID "/" CID "\n"
			     "4:memory:/kubepods/besteffort/pod" UID "/" CID "\n"
			     "1:name=systemd:/kubepods/besteffort/pod" UID "/" CID "\n"
			     "0::/kubepods/besteffort/pod" UID "/" CID "\n";
	assert_int_equal(bk_proc_cgroup_parse(hybrid, &r), 0);
	assert_string_equal(r.container_id, CID);
	/* pure v2 */
	assert_int_equal(bk_proc_cgroup_parse("0::/kubepods/pod" UID "/" CID "\n", &r), 0);
	/* v1 only (the v2 line says "/") */
	assert_int_equal(bk_proc_cgroup_parse("3:pids:/kubepods/pod" UID "/" CID "\n0::/\n", &r), 0);
	assert_string_equal(r.pod_uid, UID);
	/* lines that disagree are refused */
	assert_int_equal(bk_proc_cgroup_parse("3:pids:/kubepods/pod" UID "/other\n0::/kubepods/pod" UID "/" CID "\n",
					      &r),
			 -EINVAL);
	/* host process */
	assert_int_equal(bk_proc_cgroup_parse("0::/user.slice\n", &r), -ENOENT);
	assert_int_equal(bk_proc_cgroup_parse("", &r), -ENOENT);
	/* garbage */
	assert_int_equal(bk_proc_cgroup_parse("garbage\n", &r), -EINVAL);
	assert_int_equal(bk_proc_cgroup_parse("x:pids:/\n", &r), -EINVAL);
	char path[256];
	assert_int_equal(bk_proc_cgroup_v2_path(hybrid, path, sizeof(path)), 0);
	assert_string_equal(path, "/kubepods/besteffort/pod" UID "/" CID);
	assert_int_equal(bk_proc_cgroup_v1_path("5:cpu,cpuacct:/a\n3:pids:/b\n", "cpuacct", path, sizeof(path)), 0);
	assert_string_equal(path, "/a");
	assert_int_equal(bk_proc_cgroup_v1_path("5:cpu,cpuacct:/a\n", "memory", path, sizeof(path)), -ENOENT);
}

static const char *STATE = "{\"id\":\"" CID "\",\"init_process_pid\":4242,\"init_process_start\":123456,"
			   "\"config\":{\"rootfs\":\"/run/x/rootfs\",\"labels\":["
			   "\"bundle=/run/x\",\"io.kubernetes.cri.container-name=shim\","
			   "\"io.kubernetes.cri.container-type=container\","
			   "\"io.kubernetes.pod.uid=" UID "\",\"io.kubernetes.pod.name=web\","
			   "\"io.kubernetes.pod.namespace=sandboxes\",\"boxkite.dev/egress-policy=internet\"]}}";

static void state_json(void **st)
{
	struct bk_container_info c;
	assert_int_equal(bk_state_parse(STATE, strlen(STATE), &c), 0);
	assert_string_equal(c.id, CID);
	assert_int_equal(c.init_pid, 4242);
	assert_int_equal(c.init_start, 123456);
	assert_string_equal(c.name, "shim");
	assert_string_equal(c.pod_uid, UID);
	assert_string_equal(c.pod_name, "web");
	assert_string_equal(c.pod_namespace, "sandboxes");
	assert_string_equal(c.egress_policy, "internet");
	assert_string_equal(c.rootfs, "/run/x/rootfs");

	/* CRI-O label names */
	const char *crio = "{\"id\":\"abc\",\"init_process_pid\":7,\"config\":{\"labels\":["
			   "\"io.kubernetes.container.name=sandbox\",\"io.kubernetes.pod.uid=" UIDU "\"]}}";
	assert_int_equal(bk_state_parse(crio, strlen(crio), &c), 0);
	assert_string_equal(c.name, "sandbox");
	assert_string_equal(c.pod_uid, UID);
}

static void state_json_refused(void **st)
{
	struct bk_container_info c;
	static const char *bad[] = {
		"",
		"{",
		"[]",
		"{\"id\":\"abc\"}",
		"{\"id\":\"../x\",\"init_process_pid\":7,\"config\":{}}",
		"{\"id\":\"abc\",\"init_process_pid\":-1,\"config\":{}}",
		"{\"id\":\"abc\",\"init_process_pid\":1.5,\"config\":{}}",
		"{\"id\":\"abc\",\"init_process_pid\":\"7\",\"config\":{}}",
		"{\"id\":\"abc\",\"init_process_pid\":7,\"config\":{\"labels\":{}}}",
		"{\"id\":\"abc\",\"init_process_pid\":7,\"config\":{\"labels\":[1]}}",
		"{\"id\":\"abc\",\"init_process_pid\":7,\"config\":{\"labels\":["
		"\"io.kubernetes.pod.uid=nope\",\"io.kubernetes.container.name=x\"]}}",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_int_equal(bk_state_parse(bad[i], strlen(bad[i]), &c), -EINVAL);
	/* not a Kubernetes container */
	const char *plain = "{\"id\":\"abc\",\"init_process_pid\":7,\"config\":{\"labels\":[\"bundle=/x\"]}}";
	assert_int_equal(bk_state_parse(plain, strlen(plain), &c), -ENOENT);
	/* NUL byte inside */
	char nul[] = "{\"id\":\"abc\"\0,\"init_process_pid\":7,\"config\":{}}";
	assert_int_equal(bk_state_parse(nul, sizeof(nul) - 1, &c), -EINVAL);
}

static void uid_canon(void **st)
{
	char out[BK_UID_LEN + 1];
	assert_int_equal(bk_pod_uid_canon("0A1B2C3D_4E5F_6789_ABCD_EF0123456789", 36, out), 0);
	assert_string_equal(out, UID);
	assert_int_equal(bk_pod_uid_canon(UID, 35, out), -EINVAL);
	assert_int_equal(bk_pod_uid_canon("0a1b2c3d-4e5f-6789-abcd+ef0123456789", 36, out), -EINVAL);
	assert_true(bk_container_id_valid("abc-DEF_1.2"));
	assert_false(bk_container_id_valid(""));
	assert_false(bk_container_id_valid(".."));
	assert_false(bk_container_id_valid("a/b"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cgroupfs_layouts), cmocka_unit_test(systemd_layouts),
		cmocka_unit_test(refused_paths),    cmocka_unit_test(proc_cgroup_files),
		cmocka_unit_test(state_json),       cmocka_unit_test(state_json_refused),
		cmocka_unit_test(uid_canon),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
