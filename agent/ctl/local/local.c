/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/ctl/local/local.h"
#include "lib/util.h"

#include <cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>
#include <openssl/x509.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define LOCAL_DIR "/run/boxkite/local"
/* where the shim container sees the agent socket's directory */
#define POD_SOCK_DIR "/run/boxkite/pods"
#define MGR_NETNS "boxkite-mgr"
#define POD_NS "boxkite-local"
#define SANDBOX_UID 1000
#define SHIM_UID 65532

static int run_cmd(char *const argv[], bool quiet)
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int dn = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (dn >= 0) {
			dup2(dn, 0);
			if (quiet) {
				dup2(dn, 1);
				dup2(dn, 2);
			} else {
				dup2(2, 1); /* keep our stdout for the JSON result */
			}
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

#define RUN(quiet, ...) run_cmd((char *const[]){ __VA_ARGS__, NULL }, quiet)

static bool name_ok(const char *n)
{
	size_t l = strlen(n);
	if (l == 0 || l > 40 || n[0] == '-' || n[l - 1] == '-')
		return false;
	for (const char *p = n; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
			return false;
	return true;
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static int rand_bytes(uint8_t *b, size_t n)
{
	return getrandom(b, n, 0) == (ssize_t)n ? 0 : -EIO;
}

static int write_text(const char *path, const char *s, mode_t mode, uid_t uid)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -errno;
	size_t n = strlen(s);
	int r = write(fd, s, n) == (ssize_t)n ? 0 : -EIO;
	if (r == 0 && fchown(fd, uid, uid) < 0)
		r = -errno;
	if (r == 0 && fchmod(fd, mode) < 0)
		r = -errno;
	close(fd);
	return r;
}

/* ---- TLS material ------------------------------------------------------------ */

/* pin = "sha256//" base64(sha256(DER SubjectPublicKeyInfo)), curl's --pinnedpubkey */
static int spki_pin(EVP_PKEY *pkey, char *pin, size_t pinlen)
{
	unsigned char *der = NULL;
	int dl = i2d_PUBKEY(pkey, &der);
	unsigned char md[32];
	unsigned int mdl = 0;
	bool ok = dl > 0 && EVP_Digest(der, (size_t)dl, md, &mdl, EVP_sha256(), NULL);
	OPENSSL_free(der);
	if (!ok)
		return -EIO;
	char b64[64];
	EVP_EncodeBlock((unsigned char *)b64, md, (int)mdl);
	snprintf(pin, pinlen, "sha256//%s", b64);
	return 0;
}

static int make_tls(const char *dir, const char *cn, char *pin, size_t pinlen)
{
	int r = -EIO;
	EVP_PKEY *pkey = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	if (!pkey || !x)
		goto out;
	uint8_t serial[16];
	if (rand_bytes(serial, sizeof(serial)) < 0)
		goto out;
	serial[0] &= 0x7f;
	BIGNUM *bn = BN_bin2bn(serial, sizeof(serial), NULL);
	BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
	BN_free(bn);
	X509_set_version(x, 2);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 365L * 24 * 3600);
	X509_set_pubkey(x, pkey);
	X509_NAME *nm = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, nm);
	if (!X509_sign(x, pkey, EVP_sha256()))
		goto out;
	char p[600];
	snprintf(p, sizeof(p), "%s/tls.key", dir);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f || !PEM_write_PrivateKey(f, pkey, NULL, NULL, 0, NULL, NULL)) {
		if (f)
			fclose(f);
		goto out;
	}
	fclose(f);
	if (chown(p, SHIM_UID, SHIM_UID) < 0)
		goto out;
	snprintf(p, sizeof(p), "%s/tls.crt", dir);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f || !PEM_write_X509(f, x)) {
		if (f)
			fclose(f);
		goto out;
	}
	fclose(f);
	r = spki_pin(pkey, pin, pinlen);
out:
	X509_free(x);
	EVP_PKEY_free(pkey);
	return r;
}

/* ---- OCI bundles ---------------------------------------------------------------- */

static cJSON *mount(const char *dst, const char *type, const char *src, const char *opts_csv)
{
	cJSON *m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "destination", dst);
	cJSON_AddStringToObject(m, "type", type);
	cJSON_AddStringToObject(m, "source", src);
	cJSON *o = cJSON_AddArrayToObject(m, "options");
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", opts_csv);
	for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","))
		cJSON_AddItemToArray(o, cJSON_CreateString(t));
	return m;
}

static void add_strs(cJSON *obj, const char *key, const char *const *v)
{
	cJSON *a = cJSON_AddArrayToObject(obj, key);
	for (; *v; v++)
		cJSON_AddItemToArray(a, cJSON_CreateString(*v));
}

struct pod {
	char name[64], uid[40], sandbox_id[65], shim_id[65], netns[80], dir[256];
	int idx;
};

static int make_rootfs(const char *root)
{
	static const char *const dirs[] = { "usr", "etc", "proc", "dev", "sys", "tmp", "workspace", "mnt",
					    "mnt/user-data", "mnt/user-data/outputs", "mnt/user-data/uploads",
					    "mnt/skills", "opt", "opt/boxkite", "run", "run/boxkite", "run/boxkite/pods", "run/secrets", "run/secrets/boxkite", NULL };
	int r = mkdir_p(root, 0755);
	if (r < 0)
		return r;
	char p[600];
	for (int i = 0; dirs[i]; i++) {
		snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
	}
	static const char *const links[][2] = { { "bin", "usr/bin" }, { "sbin", "usr/sbin" }, { "lib", "usr/lib" },
						{ "lib64", "usr/lib64" } };
	for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
		snprintf(p, sizeof(p), "%s/%s", root, links[i][0]);
		if (symlink(links[i][1], p) < 0 && errno != EEXIST)
			return -errno;
	}
	/* runc gives a tmpfs the mode of its mount point: /tmp must be 1777 */
	snprintf(p, sizeof(p), "%s/tmp", root);
	if (chmod(p, 01777) < 0)
		return -errno;
	return 0;
}

static int write_config(const struct pod *pd, const char *which, const struct local_opts *o, const char *bundle)
{
	bool shim = streq(which, "shim");
	const char *id = shim ? pd->shim_id : pd->sandbox_id;
	char p[700], rootfs[600], netns[200], cgp[300], tmp[700];
	snprintf(rootfs, sizeof(rootfs), "%s/rootfs", bundle);
	int r = make_rootfs(rootfs);
	if (r < 0)
		return r;
	cJSON *c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "ociVersion", "1.0.2");
	cJSON *root = cJSON_AddObjectToObject(c, "root");
	cJSON_AddStringToObject(root, "path", "rootfs");
	cJSON_AddBoolToObject(root, "readonly", true);
	cJSON_AddStringToObject(c, "hostname", pd->name);
	cJSON *proc = cJSON_AddObjectToObject(c, "process");
	cJSON_AddBoolToObject(proc, "terminal", false);
	cJSON *user = cJSON_AddObjectToObject(proc, "user");
	cJSON_AddNumberToObject(user, "uid", shim ? SHIM_UID : SANDBOX_UID);
	cJSON_AddNumberToObject(user, "gid", shim ? SHIM_UID : SANDBOX_UID);
	cJSON_AddStringToObject(proc, "cwd", "/");
	cJSON_AddBoolToObject(proc, "noNewPrivileges", true);
	cJSON *caps = cJSON_AddObjectToObject(proc, "capabilities");
	static const char *const none[] = { NULL };
	add_strs(caps, "bounding", none);
	add_strs(caps, "effective", none);
	add_strs(caps, "permitted", none);
	add_strs(caps, "inheritable", none);
	add_strs(caps, "ambient", none);
	cJSON *rl = cJSON_AddArrayToObject(proc, "rlimits");
	cJSON *nofile = cJSON_CreateObject();
	cJSON_AddStringToObject(nofile, "type", "RLIMIT_NOFILE");
	cJSON_AddNumberToObject(nofile, "hard", 1024);
	cJSON_AddNumberToObject(nofile, "soft", 1024);
	cJSON_AddItemToArray(rl, nofile);
	/* the agent socket's directory (the pods' directory, nothing else of
	 * the agent's) at the same path as on a Kubernetes node */
	char sockenv[300], sockdir[300];
	snprintf(sockdir, sizeof(sockdir), "%s", o->agent_socket);
	char *sockbase = strrchr(o->agent_socket, '/');
	snprintf(sockenv, sizeof(sockenv), "BOXKITE_AGENT_SOCKET=" POD_SOCK_DIR "/%s", sockbase ? sockbase + 1 : o->agent_socket);
	if (shim) {
		static const char *const args[] = { "/opt/boxkite/boxkite-shim", NULL };
		add_strs(proc, "args", args);
		const char *defaults[] = { "PATH=/usr/bin:/bin", "SIDECAR_AUTH_TOKEN_FILE=/run/secrets/boxkite/token",
					   "SIDECAR_TLS_CERT=/run/secrets/boxkite/tls.crt",
					   "SIDECAR_TLS_KEY=/run/secrets/boxkite/tls.key", "SIDECAR_LISTEN=0.0.0.0:8080",
					   /* granted secrets for /exec's secret_env: files put in
					    * <secret dir>/granted, seen by the shim only */
					   "SIDECAR_SECRETS_DIR=/run/secrets/boxkite/granted", sockenv };
		/* --shim-env first: getenv() takes the first of a name, so these
		 * override the defaults */
		const char *env[LOCAL_SHIM_ENV_MAX + ARRAY_SIZE(defaults) + 1];
		size_t ne = 0;
		for (unsigned i = 0; i < o->n_shim_env && i < LOCAL_SHIM_ENV_MAX; i++)
			env[ne++] = o->shim_env[i];
		for (size_t i = 0; i < ARRAY_SIZE(defaults); i++)
			env[ne++] = defaults[i];
		env[ne] = NULL;
		add_strs(proc, "env", env);
	} else {
		/* The sandbox container idles; commands arrive as execs. */
		static const char *const args[] = { "/bin/sh", "-c",
						    "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done", NULL };
		add_strs(proc, "args", args);
		static const char *const env[] = { "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace", NULL };
		add_strs(proc, "env", env);
	}
	cJSON *mounts = cJSON_AddArrayToObject(c, "mounts");
	cJSON_AddItemToArray(mounts, mount("/proc", "proc", "proc", "nosuid,noexec,nodev"));
	cJSON_AddItemToArray(mounts, mount("/dev", "tmpfs", "tmpfs", "nosuid,strictatime,mode=755,size=65536k"));
	cJSON_AddItemToArray(mounts, mount("/dev/pts", "devpts", "devpts", "nosuid,noexec,newinstance,ptmxmode=0666,mode=0620"));
	cJSON_AddItemToArray(mounts, mount("/dev/shm", "tmpfs", "shm", "nosuid,noexec,nodev,mode=1777,size=65536k"));
	cJSON_AddItemToArray(mounts, mount("/sys", "sysfs", "sysfs", "nosuid,noexec,nodev,ro"));
	cJSON_AddItemToArray(mounts, mount("/usr", "bind", "/usr", "rbind,ro,nosuid,nodev"));
	cJSON_AddItemToArray(mounts, mount("/etc", "bind", "/etc", "rbind,ro,nosuid,nodev"));
	snprintf(p, sizeof(p), "%s/passwd", pd->dir);
	cJSON_AddItemToArray(mounts, mount("/etc/passwd", "bind", p, "bind,ro"));
	snprintf(p, sizeof(p), "%s/group", pd->dir);
	cJSON_AddItemToArray(mounts, mount("/etc/group", "bind", p, "bind,ro"));
	snprintf(p, sizeof(p), "%s/resolv.conf", pd->dir);
	cJSON_AddItemToArray(mounts, mount("/etc/resolv.conf", "bind", p, "bind,ro"));
	cJSON_AddItemToArray(mounts, mount("/tmp", "tmpfs", "tmpfs", "nosuid,nodev,mode=1777,size=256m"));
	if (shim) {
		cJSON_AddItemToArray(mounts, mount("/opt/boxkite/boxkite-shim", "bind", o->shim_bin, "bind,ro"));
		char *d = dirname(sockdir);
		cJSON_AddItemToArray(mounts, mount(POD_SOCK_DIR, "bind", d, "bind,ro,nosuid,nodev,noexec"));
		snprintf(p, sizeof(p), "%s/secret", pd->dir);
		cJSON_AddItemToArray(mounts, mount("/run/secrets/boxkite", "bind", p, "bind,ro,nosuid,nodev,noexec"));
	} else {
		snprintf(tmp, sizeof(tmp), "nosuid,nodev,mode=0755,uid=%d,gid=%d,size=512m", SANDBOX_UID, SANDBOX_UID);
		cJSON_AddItemToArray(mounts, mount("/workspace", "tmpfs", "tmpfs", tmp));
		cJSON_AddItemToArray(mounts, mount("/mnt/user-data/outputs", "tmpfs", "tmpfs", tmp));
		cJSON_AddItemToArray(mounts, mount("/mnt/user-data/uploads", "tmpfs", "tmpfs", "ro,nosuid,nodev,size=1m"));
		cJSON_AddItemToArray(mounts, mount("/mnt/skills", "tmpfs", "tmpfs", "ro,nosuid,nodev,size=1m"));
	}
	cJSON *an = cJSON_AddObjectToObject(c, "annotations");
	cJSON_AddStringToObject(an, "io.kubernetes.cri.container-type", "container");
	cJSON_AddStringToObject(an, "io.kubernetes.cri.container-name", which);
	cJSON_AddStringToObject(an, "io.kubernetes.cri.sandbox-id", pd->sandbox_id);
	cJSON_AddStringToObject(an, "io.kubernetes.cri.sandbox-name", pd->name);
	cJSON_AddStringToObject(an, "io.kubernetes.cri.sandbox-namespace", POD_NS);
	cJSON_AddStringToObject(an, "io.kubernetes.cri.sandbox-uid", pd->uid);
	cJSON_AddStringToObject(an, "io.kubernetes.pod.uid", pd->uid);
	cJSON_AddStringToObject(an, "io.kubernetes.pod.name", pd->name);
	cJSON_AddStringToObject(an, "io.kubernetes.pod.namespace", POD_NS);
	if (o->policy)
		cJSON_AddStringToObject(an, "boxkite.dev/egress-policy", o->policy);
	cJSON *lx = cJSON_AddObjectToObject(c, "linux");
	snprintf(cgp, sizeof(cgp), "/kubepods/besteffort/pod%s/%s", pd->uid, id);
	cJSON_AddStringToObject(lx, "cgroupsPath", cgp);
	cJSON *res = cJSON_AddObjectToObject(lx, "resources");
	cJSON *pids = cJSON_AddObjectToObject(res, "pids");
	cJSON_AddNumberToObject(pids, "limit", 2048);
	cJSON *mem = cJSON_AddObjectToObject(res, "memory");
	cJSON_AddNumberToObject(mem, "limit", 4.0 * 1024 * 1024 * 1024);
	cJSON *nss = cJSON_AddArrayToObject(lx, "namespaces");
	static const char *const types[] = { "pid", "ipc", "uts", "mount", "cgroup" };
	for (size_t i = 0; i < ARRAY_SIZE(types); i++) {
		cJSON *n = cJSON_CreateObject();
		cJSON_AddStringToObject(n, "type", types[i]);
		cJSON_AddItemToArray(nss, n);
	}
	cJSON *net = cJSON_CreateObject();
	cJSON_AddStringToObject(net, "type", "network");
	snprintf(netns, sizeof(netns), "/run/netns/%s", pd->netns);
	cJSON_AddStringToObject(net, "path", netns);
	cJSON_AddItemToArray(nss, net);
	static const char *const masked[] = { "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
					      "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
					      "/proc/scsi", "/sys/firmware", NULL };
	add_strs(lx, "maskedPaths", masked);
	static const char *const ro[] = { "/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
					  "/proc/sysrq-trigger", NULL };
	add_strs(lx, "readonlyPaths", ro);
	char *txt = cJSON_Print(c);
	cJSON_Delete(c);
	snprintf(p, sizeof(p), "%s/config.json", bundle);
	r = txt ? write_text(p, txt, 0600, 0) : -ENOMEM;
	free(txt);
	return r;
}

/* ---- waiting for the shim ------------------------------------------------------------ */

enum shim_state { SHIM_CONNECTED = 0, SHIM_SILENT = 1, SHIM_NO_AGENT = 2 };

/* One GET /health on url's address, over TLS with the peer's key checked
 * against pin: SHIM_CONNECTED when it says "agent":"connected". */
static enum shim_state health_once(const struct sockaddr_in *sa, const char *pin, SSL_CTX *ctx)
{
	enum shim_state st = SHIM_SILENT;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return st;
	struct timeval tv = { .tv_sec = 1 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	SSL *ssl = NULL;
	char buf[4096], peer[128];
	size_t n = 0;
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0 || !(ssl = SSL_new(ctx)) || !SSL_set_fd(ssl, fd) ||
	    SSL_connect(ssl) != 1)
		goto out;
	EVP_PKEY *pk = SSL_get0_peer_certificate(ssl) ? X509_get0_pubkey(SSL_get0_peer_certificate(ssl)) : NULL;
	if (!pk || spki_pin(pk, peer, sizeof(peer)) < 0 || !streq(peer, pin))
		goto out;
	static const char req[] = "GET /health HTTP/1.1\r\nHost: shim\r\nConnection: close\r\n\r\n";
	if (SSL_write(ssl, req, sizeof(req) - 1) != (int)sizeof(req) - 1)
		goto out;
	for (int k; n < sizeof(buf) - 1 && (k = SSL_read(ssl, buf + n, (int)(sizeof(buf) - 1 - n))) > 0;)
		n += (size_t)k;
	buf[n] = '\0';
	const char *body = strstr(buf, "\r\n\r\n");
	cJSON *h = body && startswith(buf, "HTTP/1.1 200") ? cJSON_Parse(body + 4) : NULL;
	if (h) {
		const char *a = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(h, "agent"));
		st = a && streq(a, "connected") ? SHIM_CONNECTED : SHIM_NO_AGENT;
		cJSON_Delete(h);
	}
out:
	SSL_free(ssl);
	close(fd);
	return st;
}

/* Polls the shim's /health from the manager netns (in a child: this process
 * stays where it is) until it reports the agent connected, for at most
 * wait_s seconds; returns the last state seen. */
static enum shim_state wait_shim(const struct pod *pd, const char *pin, unsigned wait_s)
{
	pid_t pid = fork();
	if (pid < 0)
		return SHIM_SILENT;
	if (pid == 0) {
		int nfd = open("/run/netns/" MGR_NETNS, O_RDONLY | O_CLOEXEC);
		if (nfd < 0 || setns(nfd, CLONE_NEWNET) < 0)
			_exit(SHIM_SILENT);
		SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
		if (!ctx)
			_exit(SHIM_SILENT);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL); /* self-signed: the pin is the check */
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(8080) };
		char a[32];
		snprintf(a, sizeof(a), "10.250.%d.2", pd->idx);
		inet_pton(AF_INET, a, &sa.sin_addr);
		uint64_t end = now_ns() + (uint64_t)wait_s * 1000000000ull;
		enum shim_state st;
		while ((st = health_once(&sa, pin, ctx)) != SHIM_CONNECTED && now_ns() < end)
			usleep(50000);
		_exit(st);
	}
	int ws;
	if (waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws))
		return SHIM_SILENT;
	return (enum shim_state)WEXITSTATUS(ws);
}

/* ---- bookkeeping ------------------------------------------------------------------ */

static int lock_local(void)
{
	int r = mkdir_p(LOCAL_DIR, 0700);
	if (r < 0)
		return r;
	int fd = open(LOCAL_DIR "/.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX) < 0) {
		close(fd);
		return -errno;
	}
	return fd;
}

static int read_meta(const char *name, struct pod *pd)
{
	char p[300];
	snprintf(p, sizeof(p), LOCAL_DIR "/%s/meta.json", name);
	_cleanup_free_ char *txt = NULL;
	size_t len;
	int r = read_file_at(AT_FDCWD, p, 1 << 16, &txt, &len);
	if (r < 0)
		return r;
	cJSON *m = cJSON_ParseWithLength(txt, len);
	if (!m)
		return -EINVAL;
	memset(pd, 0, sizeof(*pd));
	snprintf(pd->name, sizeof(pd->name), "%s", name);
	const char *keys[] = { "pod_uid", "sandbox_id", "shim_id", "netns" };
	char *dst[] = { pd->uid, pd->sandbox_id, pd->shim_id, pd->netns };
	size_t sz[] = { sizeof(pd->uid), sizeof(pd->sandbox_id), sizeof(pd->shim_id), sizeof(pd->netns) };
	for (int i = 0; i < 4; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, keys[i]);
		if (cJSON_IsString(v))
			snprintf(dst[i], sz[i], "%s", v->valuestring);
	}
	const cJSON *idx = cJSON_GetObjectItemCaseSensitive(m, "idx");
	pd->idx = cJSON_IsNumber(idx) ? idx->valueint : 0;
	snprintf(pd->dir, sizeof(pd->dir), LOCAL_DIR "/%s", name);
	cJSON_Delete(m);
	return 0;
}

static bool idx_used(int idx)
{
	DIR *d = opendir(LOCAL_DIR);
	if (!d)
		return false;
	struct dirent *de;
	bool used = false;
	while ((de = readdir(d)) && !used) {
		if (de->d_name[0] == '.')
			continue;
		struct pod pd;
		if (read_meta(de->d_name, &pd) == 0 && pd.idx == idx)
			used = true;
	}
	closedir(d);
	return used;
}

static int count_pods(void)
{
	DIR *d = opendir(LOCAL_DIR);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static bool netns_exists(const char *n)
{
	char p[200];
	snprintf(p, sizeof(p), "/run/netns/%s", n);
	return access(p, F_OK) == 0;
}

/* ---- the pod's cgroup ------------------------------------------------------------ */

#define CG_ROOT "/sys/fs/cgroup"

/* Whether a space-separated list file holds the word w. */
static bool list_has(const char *file, const char *w)
{
	_cleanup_free_ char *txt = NULL;
	if (read_file_at(AT_FDCWD, file, 4096, &txt, NULL) < 0)
		return false;
	for (char *sv = NULL, *t = strtok_r(txt, " \n", &sv); t; t = strtok_r(NULL, " \n", &sv))
		if (streq(t, w))
			return true;
	return false;
}

static int mkdir_one(const char *d)
{
	return mkdir(d, 0755) == 0 || errno == EEXIST ? 0 : -errno;
}

/* The pod's directory in the hierarchy that holds controller ctrl, made
 * (like kubelet's pod cgroup, before any container): the v2 one where it
 * has the controller (enabled down to the pod), else the v1 one. */
static int pod_cg_dir(const char *uid, const char *ctrl, char *out, size_t len, bool *v2)
{
	const char *roots[] = { CG_ROOT, CG_ROOT "/unified" };
	char p[300];
	for (size_t i = 0; i < ARRAY_SIZE(roots); i++) {
		snprintf(p, sizeof(p), "%s/cgroup.controllers", roots[i]);
		if (!list_has(p, ctrl))
			continue;
		const char *levels[] = { "", "/kubepods", "/kubepods/besteffort" };
		char plus[32];
		snprintf(plus, sizeof(plus), "+%s", ctrl);
		for (size_t l = 0; l < ARRAY_SIZE(levels); l++) {
			snprintf(p, sizeof(p), "%s%s", roots[i], levels[l]);
			int r = l ? mkdir_one(p) : 0;
			if (r < 0)
				return r;
			snprintf(p, sizeof(p), "%s%s/cgroup.subtree_control", roots[i], levels[l]);
			if (!list_has(p, ctrl) && (r = write_file_at(AT_FDCWD, p, plus)) < 0)
				return r;
		}
		snprintf(out, len, "%s/kubepods/besteffort/pod%s", roots[i], uid);
		*v2 = true;
		return mkdir_one(out);
	}
	snprintf(p, sizeof(p), CG_ROOT "/%s/cgroup.procs", ctrl);
	if (access(p, F_OK) < 0)
		return -EOPNOTSUPP;
	*v2 = false;
	snprintf(out, len, CG_ROOT "/%s/kubepods", ctrl);
	int r = mkdir_one(out);
	snprintf(out, len, CG_ROOT "/%s/kubepods/besteffort", ctrl);
	if (r == 0)
		r = mkdir_one(out);
	snprintf(out, len, CG_ROOT "/%s/kubepods/besteffort/pod%s", ctrl, uid);
	return r < 0 ? r : mkdir_one(out);
}

static int cg_write(const char *dir, const char *file, const char *fmt, uint64_t a, uint64_t b)
{
	char p[600], v[64];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	snprintf(v, sizeof(v), fmt, (unsigned long long)a, (unsigned long long)b);
	return write_file_at(AT_FDCWD, p, v);
}

/* The pod's caps (kubelet sets them on the pod cgroup: the execs the agent
 * runs below it are held to them too). A cap that cannot be set fails the
 * create. */
static int pod_limits(const struct pod *pd, const struct local_opts *o)
{
	char d[400];
	bool v2;
	int r;
	if ((r = pod_cg_dir(pd->uid, "memory", d, sizeof(d), &v2)) < 0 ||
	    (r = cg_write(d, v2 ? "memory.max" : "memory.limit_in_bytes", "%llu", o->memory, 0)) < 0) {
		fprintf(stderr, "boxkitectl: cannot cap the pod's memory: %s\n", strerror(-r));
		return r;
	}
	if ((r = pod_cg_dir(pd->uid, "pids", d, sizeof(d), &v2)) < 0 || (r = cg_write(d, "pids.max", "%llu", o->pids, 0)) < 0) {
		fprintf(stderr, "boxkitectl: cannot cap the pod's pids: %s\n", strerror(-r));
		return r;
	}
	if (!o->cpus_milli)
		return 0;
	uint64_t quota = o->cpus_milli * 100; /* of a 100 ms period */
	if ((r = pod_cg_dir(pd->uid, "cpu", d, sizeof(d), &v2)) < 0 ||
	    (r = v2 ? cg_write(d, "cpu.max", "%llu %llu", quota, 100000)
		    : (cg_write(d, "cpu.cfs_period_us", "%llu", 100000, 0) < 0
			       ? -EIO
			       : cg_write(d, "cpu.cfs_quota_us", "%llu", quota, 0))) < 0) {
		fprintf(stderr, "boxkitectl: cannot set the pod's CPU quota: %s\n", strerror(-r));
		return r;
	}
	return 0;
}

/* rmdir the pod's cgroups in every hierarchy (the v2 root itself on a pure
 * v2 node, each mount below /sys/fs/cgroup on a hybrid one), deepest first;
 * exec cgroups a crashed agent left behind are killed and removed too. */
static void remove_pod_cgroups(const char *uid)
{
	DIR *h = opendir(CG_ROOT);
	if (!h)
		return;
	struct dirent *de = NULL;
	bool root_done = false;
	while (!root_done || (de = readdir(h))) {
		char base[300], pod[400];
		if (!root_done) {
			root_done = true;
			snprintf(base, sizeof(base), CG_ROOT);
		} else if (de->d_name[0] == '.' || streq(de->d_name, "kubepods")) {
			continue;
		} else {
			snprintf(base, sizeof(base), CG_ROOT "/%s", de->d_name);
		}
		const char *qos[] = { "/kubepods/besteffort", "/kubepods/burstable", "/kubepods" };
		for (size_t q = 0; q < ARRAY_SIZE(qos); q++) {
			snprintf(pod, sizeof(pod), "%s%s/pod%s", base, qos[q], uid);
			DIR *pd = opendir(pod);
			if (!pd)
				continue;
			struct dirent *ce;
			while ((ce = readdir(pd))) {
				if (ce->d_type != DT_DIR || ce->d_name[0] == '.')
					continue;
				char child[700];
				snprintf(child, sizeof(child), "%s/%s/cgroup.kill", pod, ce->d_name);
				write_file_at(AT_FDCWD, child, "1");
				snprintf(child, sizeof(child), "%s/%s", pod, ce->d_name);
				for (int i = 0; i < 100 && rmdir(child) < 0 && errno == EBUSY; i++)
					usleep(10000);
			}
			closedir(pd);
			rmdir(pod);
		}
		char p[400];
		snprintf(p, sizeof(p), "%s/kubepods/besteffort", base);
		rmdir(p);
		snprintf(p, sizeof(p), "%s/kubepods/burstable", base);
		rmdir(p);
		snprintf(p, sizeof(p), "%s/kubepods", base);
		rmdir(p);
	}
	closedir(h);
}

static void rm_rf(const char *path)
{
	RUN(true, "rm", "-rf", "--one-file-system", (char *)path);
}

static void teardown(const struct pod *pd, const struct local_opts *o)
{
	const char *ids[] = { pd->shim_id, pd->sandbox_id };
	for (int i = 0; i < 2; i++) {
		if (!ids[i][0])
			continue;
		RUN(true, "runc", "--root", (char *)o->runc_root, "kill", (char *)ids[i], "KILL");
		RUN(true, "runc", "--root", (char *)o->runc_root, "delete", "--force", (char *)ids[i]);
	}
	if (pd->uid[0])
		remove_pod_cgroups(pd->uid);
	if (pd->idx > 0 && netns_exists(MGR_NETNS)) {
		/* synchronously: the pod netns itself goes away later, in a
		 * kernel worker, and its link with it */
		char ifn[32];
		snprintf(ifn, sizeof(ifn), "bkm%d", pd->idx);
		RUN(true, "ip", "-n", MGR_NETNS, "link", "del", ifn);
	}
	if (pd->netns[0] && netns_exists(pd->netns))
		RUN(true, "ip", "netns", "del", (char *)pd->netns);
	if (pd->dir[0])
		rm_rf(pd->dir);
	if (count_pods() == 0 && netns_exists(MGR_NETNS))
		RUN(true, "ip", "netns", "del", MGR_NETNS);
}

static int fail(const char *what)
{
	fprintf(stderr, "boxkitectl: %s\n", what);
	return -EIO;
}

int local_create(const char *name, const struct local_opts *o)
{
	if (!name_ok(name)) {
		fprintf(stderr, "boxkitectl: sandbox name must be 1-40 of [a-z0-9-], not starting or ending with '-'\n");
		return -EINVAL;
	}
	if (access(o->shim_bin, X_OK) < 0) {
		fprintf(stderr, "boxkitectl: shim binary %s: %s\n", o->shim_bin, strerror(errno));
		return -ENOENT;
	}
	_cleanup_close_ int lk = lock_local();
	if (lk < 0)
		return fail("cannot lock " LOCAL_DIR);
	struct pod pd;
	memset(&pd, 0, sizeof(pd));
	snprintf(pd.name, sizeof(pd.name), "%s", name);
	snprintf(pd.dir, sizeof(pd.dir), LOCAL_DIR "/%s", name);
	if (mkdir(pd.dir, 0700) < 0) {
		if (errno == EEXIST)
			fprintf(stderr, "boxkitectl: sandbox %s already exists\n", name);
		else
			fprintf(stderr, "boxkitectl: cannot create %s: %s\n", pd.dir, strerror(errno));
		return -EEXIST;
	}
	int r = -EIO;
	char pin[128] = "", p[600], mgr_if[32], addr[64];
	uint8_t b[32];
	if (rand_bytes(b, 16) < 0)
		goto fail;
	b[6] = (b[6] & 0x0f) | 0x40;
	b[8] = (b[8] & 0x3f) | 0x80;
	snprintf(pd.uid, sizeof(pd.uid), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
		 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
	if (rand_bytes(b, 32) < 0)
		goto fail;
	hex(b, 32, pd.sandbox_id);
	if (rand_bytes(b, 32) < 0)
		goto fail;
	hex(b, 32, pd.shim_id);
	snprintf(pd.netns, sizeof(pd.netns), "boxkite-%s", name);
	for (pd.idx = 1; pd.idx <= 250 && idx_used(pd.idx); pd.idx++)
		;
	if (pd.idx > 250) {
		fail("no free local pod address (250 sandboxes)");
		goto fail;
	}
	/* meta first: a failed create is then deletable like any other */
	cJSON *m = cJSON_CreateObject();
	cJSON_AddStringToObject(m, "name", name);
	cJSON_AddStringToObject(m, "pod_uid", pd.uid);
	cJSON_AddStringToObject(m, "sandbox_id", pd.sandbox_id);
	cJSON_AddStringToObject(m, "shim_id", pd.shim_id);
	cJSON_AddStringToObject(m, "netns", pd.netns);
	cJSON_AddNumberToObject(m, "idx", pd.idx);
	char *mt = cJSON_PrintUnformatted(m);
	cJSON_Delete(m);
	snprintf(p, sizeof(p), "%s/meta.json", pd.dir);
	if (!mt || write_text(p, mt, 0600, 0) < 0) {
		free(mt);
		goto fail;
	}
	free(mt);

	/* network: the pod's namespace, linked to the local "manager" netns
	 * (never to the host namespace) */
	if (!netns_exists(MGR_NETNS)) {
		if (RUN(false, "ip", "netns", "add", MGR_NETNS) < 0 ||
		    RUN(false, "ip", "-n", MGR_NETNS, "link", "set", "lo", "up") < 0) {
			fail("cannot create the manager network namespace");
			goto fail;
		}
	}
	snprintf(mgr_if, sizeof(mgr_if), "bkm%d", pd.idx);
	if (RUN(false, "ip", "netns", "add", pd.netns) < 0 ||
	    RUN(false, "ip", "-n", pd.netns, "link", "set", "lo", "up") < 0 ||
	    RUN(false, "ip", "link", "add", "name", mgr_if, "netns", MGR_NETNS, "type", "veth", "peer", "name", "eth0",
		"netns", pd.netns) < 0) {
		fail("cannot create the pod network namespace");
		goto fail;
	}
	snprintf(addr, sizeof(addr), "10.250.%d.1/24", pd.idx);
	if (RUN(false, "ip", "-n", MGR_NETNS, "addr", "add", addr, "dev", mgr_if) < 0 ||
	    RUN(false, "ip", "-n", MGR_NETNS, "link", "set", mgr_if, "up") < 0) {
		fail("cannot configure the manager side of the pod link");
		goto fail;
	}
	snprintf(addr, sizeof(addr), "10.250.%d.2/24", pd.idx);
	if (RUN(false, "ip", "-n", pd.netns, "addr", "add", addr, "dev", "eth0") < 0 ||
	    RUN(false, "ip", "-n", pd.netns, "link", "set", "eth0", "up") < 0) {
		fail("cannot configure the pod interface");
		goto fail;
	}

	/* the pod's credentials: readable by the shim's user only */
	snprintf(p, sizeof(p), "%s/secret", pd.dir);
	if (mkdir(p, 0500) < 0 || chown(p, SHIM_UID, SHIM_UID) < 0) {
		fail("cannot create the secret directory");
		goto fail;
	}
	if (rand_bytes(b, 32) < 0)
		goto fail;
	char token[65];
	hex(b, 32, token);
	char tp[700];
	snprintf(tp, sizeof(tp), "%s/token", p);
	if (write_text(tp, token, 0400, SHIM_UID) < 0 || make_tls(p, name, pin, sizeof(pin)) < 0) {
		fail("cannot write the pod's token and TLS key");
		goto fail;
	}
	memset(token, 0, sizeof(token));
	snprintf(tp, sizeof(tp), "%s/passwd", pd.dir);
	if (write_text(tp, "root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:1000:1000:sandbox:/workspace:/bin/sh\n"
			   "shim:x:65532:65532:shim:/nonexistent:/usr/sbin/nologin\n", 0644, 0) < 0)
		goto fail;
	snprintf(tp, sizeof(tp), "%s/group", pd.dir);
	if (write_text(tp, "root:x:0:\nsandbox:x:1000:\nshim:x:65532:\n", 0644, 0) < 0)
		goto fail;
	/* like kubelet: the pod's resolv.conf names the cluster DNS service */
	snprintf(tp, sizeof(tp), "%s/resolv.conf", pd.dir);
	char rc[256];
	snprintf(rc, sizeof(rc), "nameserver %s\nsearch %s.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n",
		 o->dns ? o->dns : "10.96.0.10", POD_NS);
	if (write_text(tp, rc, 0644, 0) < 0)
		goto fail;

	/* the pod's cgroup with its caps, then the containers below it */
	if (pod_limits(&pd, o) < 0)
		goto fail;
	/* containers: sandbox first (the agent's target), then the shim */
	const char *which[] = { "sandbox", "shim" };
	const char *ids[] = { pd.sandbox_id, pd.shim_id };
	for (int i = 0; i < 2; i++) {
		char bundle[600], logp[600];
		snprintf(bundle, sizeof(bundle), "%s/%s", pd.dir, which[i]);
		if (mkdir(bundle, 0700) < 0 || write_config(&pd, which[i], o, bundle) < 0) {
			fail("cannot write the OCI bundle");
			goto fail;
		}
		snprintf(logp, sizeof(logp), "%s/%s.log", pd.dir, which[i]);
		pid_t pid = fork();
		if (pid == 0) {
			int dn = open("/dev/null", O_RDONLY | O_CLOEXEC);
			int lf = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
			if (dn < 0 || lf < 0)
				_exit(126);
			dup2(dn, 0);
			dup2(lf, 1);
			dup2(lf, 2);
			execlp("runc", "runc", "--root", o->runc_root, "run", "-d", "--bundle", bundle, ids[i], (char *)NULL);
			_exit(127);
		}
		int st;
		if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			/* one line: runc's last word, and where the rest was
			 * (the log goes with the failed pod: a copy stays) */
			_cleanup_free_ char *lt = NULL;
			char last[512] = "", keep[300];
			if (read_file_at(AT_FDCWD, logp, 65536, &lt, NULL) == 0) {
				for (char *sv = NULL, *t = strtok_r(lt, "\n", &sv); t; t = strtok_r(NULL, "\n", &sv))
					snprintf(last, sizeof(last), "%s", t);
			}
			snprintf(keep, sizeof(keep), "/run/boxkite/local/.%s-%s.log", name, which[i]);
			bool kept = rename(logp, keep) == 0;
			fprintf(stderr, "boxkitectl: runc could not start the %s container: %s (full log: %s)\n", which[i],
				last[0] ? last : "no output", kept ? keep : logp);
			goto fail;
		}
	}
	/* ready means ready: the first request through the shim finds the
	 * agent. Not ready in time: the sandbox stays, for its logs. */
	close(lk); /* the pod is made: other creates need not wait for this one's shim */
	lk = -1;
	enum shim_state st = o->wait_s ? wait_shim(&pd, pin, o->wait_s) : SHIM_CONNECTED;
	if (st != SHIM_CONNECTED) {
		if (st == SHIM_NO_AGENT)
			fprintf(stderr, "boxkitectl: sandbox %s started, but its shim did not reach the agent at %s within "
				"%u s: read %s/shim.log and the agent's log (is boxkite-agent running with --socket %s?), then "
				"run boxkitectl sandbox delete %s\n", name, o->agent_socket, o->wait_s, pd.dir, o->agent_socket, name);
		else
			fprintf(stderr, "boxkitectl: sandbox %s started, but its shim did not answer on "
				"https://10.250.%d.2:8080/health within %u s: read %s/shim.log, then run boxkitectl sandbox "
				"delete %s\n", name, pd.idx, o->wait_s, pd.dir, name);
		return -ETIMEDOUT;
	}
	cJSON *out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "name", name);
	cJSON_AddStringToObject(out, "pod_uid", pd.uid);
	snprintf(addr, sizeof(addr), "https://10.250.%d.2:8080", pd.idx);
	cJSON_AddStringToObject(out, "url", addr);
	snprintf(p, sizeof(p), "%s/secret/token", pd.dir);
	cJSON_AddStringToObject(out, "token_file", p);
	cJSON_AddStringToObject(out, "pin", pin);
	cJSON_AddStringToObject(out, "client_netns", MGR_NETNS);
	cJSON_AddStringToObject(out, "pod_netns", pd.netns);
	cJSON_AddStringToObject(out, "sandbox_container_id", pd.sandbox_id);
	cJSON_AddStringToObject(out, "shim_container_id", pd.shim_id);
	char *txt = cJSON_PrintUnformatted(out);
	cJSON_Delete(out);
	if (txt) {
		puts(txt);
		free(txt);
	}
	return 0;
fail:
	teardown(&pd, o);
	return r;
}

int local_delete(const char *name, const struct local_opts *o)
{
	if (!name_ok(name)) {
		fprintf(stderr, "boxkitectl: bad sandbox name\n");
		return -EINVAL;
	}
	_cleanup_close_ int lk = lock_local();
	if (lk < 0)
		return fail("cannot lock " LOCAL_DIR);
	struct pod pd;
	if (read_meta(name, &pd) < 0) {
		fprintf(stderr, "boxkitectl: no local sandbox named %s\n", name);
		return -ENOENT;
	}
	teardown(&pd, o);
	return 0;
}

int local_list(void)
{
	DIR *d = opendir(LOCAL_DIR);
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		struct pod pd;
		if (read_meta(de->d_name, &pd) < 0)
			continue;
		printf("%s\tpod_uid=%s\turl=https://10.250.%d.2:8080\n", pd.name, pd.uid, pd.idx);
	}
	closedir(d);
	return 0;
}
