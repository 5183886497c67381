/* SPDX-License-Identifier: Apache-2.0 */
/* /exec's secret_env: {ENV_NAME: granted secret name}, as the reference
 * sidecar takes it, resolved here, on the pod side.
 *
 * Where the granted secrets live: one file per secret in SIDECAR_SECRETS_DIR
 * (default /etc/boxkite/secrets), a Kubernetes Secret volume mounted into
 * the shim container only — never into the sandbox container, so no exec
 * can read it. A secret is granted to the current session when its name is
 * in the secret_names of the last successful /configure (kept here, in
 * memory; a shim restart grants nothing until the next /configure: fail
 * closed) and its file exists. Values are read per request and passed to
 * the agent inside that request only, as "secrets": [{env, name, value}];
 * the agent puts them in the exec's environment and scrubs them from its
 * output as [REDACTED_SECRET:<name>]. An unsafe ENV name, a name not
 * granted or not there are dropped silently, as the reference does. The
 * client's own secret_env (and any "secrets" it sends) never reaches the
 * agent. Values are never logged. */
#include "shim.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <openssl/crypto.h>

#define SECRET_VALUE_MAX (64u * 1024u)
#define SECRET_NAME_MAX 253u
#define GRANTS_MAX 64u

static pthread_mutex_t grants_lock = PTHREAD_MUTEX_INITIALIZER;
static char *grants[GRANTS_MAX];
static unsigned n_grants;

/* A Kubernetes Secret key: [-._a-zA-Z0-9]+, not starting with '.' (the
 * volume's own ..data entries), so it is one file name in the directory. */
static bool secret_name_ok(const char *n)
{
	size_t l = strlen(n);
	if (l == 0 || l > SECRET_NAME_MAX || n[0] == '.')
		return false;
	for (const char *p = n; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
		      *p == '_' || *p == '.'))
			return false;
	return true;
}

void secrets_configured(const char *body, size_t len)
{
	cJSON *j = cJSON_ParseWithLength(body, len);
	const cJSON *names = cJSON_GetObjectItemCaseSensitive(j, "secret_names");
	pthread_mutex_lock(&grants_lock);
	for (unsigned i = 0; i < n_grants; i++)
		free(grants[i]);
	n_grants = 0;
	const cJSON *it;
	const cJSON *list = cJSON_IsArray(names) ? names : NULL;
	cJSON_ArrayForEach(it, list)
	{
		if (n_grants < GRANTS_MAX && cJSON_IsString(it) && secret_name_ok(it->valuestring)) {
			grants[n_grants] = strdup(it->valuestring);
			if (grants[n_grants])
				n_grants++;
		}
	}
	pthread_mutex_unlock(&grants_lock);
	cJSON_Delete(j);
}

static bool granted(const char *name)
{
	bool ok = false;
	pthread_mutex_lock(&grants_lock);
	for (unsigned i = 0; i < n_grants && !ok; i++)
		ok = streq(grants[i], name);
	pthread_mutex_unlock(&grants_lock);
	return ok;
}

/* The secret's value, or NULL (not there, too large, unreadable, a NUL). */
static char *read_secret(const char *dir, const char *name)
{
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return NULL;
	char *buf = NULL;
	size_t len = 0;
	if (read_file_at(dfd, name, SECRET_VALUE_MAX, &buf, &len) < 0)
		return NULL;
	if (len == 0 || memchr(buf, '\0', len)) {
		OPENSSL_cleanse(buf, len);
		free(buf);
		return NULL;
	}
	return buf;
}

int secrets_rewrite_exec(const char *dir, const char *body, size_t len, char **out, size_t *outlen,
			 const char **bad_field)
{
	*bad_field = NULL;
	cJSON *j = cJSON_ParseWithLength(body, len);
	if (!j)
		return -ENOMEM; /* validated as an object before */
	cJSON *se = cJSON_DetachItemFromObjectCaseSensitive(j, "secret_env");
	cJSON_DeleteItemFromObjectCaseSensitive(j, "secrets"); /* only ever ours */
	int r = 0;
	if (se && !cJSON_IsNull(se)) {
		const cJSON *it;
		const cJSON *src = se;
		if (!cJSON_IsObject(se)) {
			*bad_field = "secret_env";
			r = -EINVAL;
			src = NULL;
		}
		cJSON_ArrayForEach(it, src)
		{
			if (!cJSON_IsString(it)) {
				*bad_field = "secret_env";
				r = -EINVAL;
				break;
			}
		}
		cJSON *list = r == 0 ? cJSON_AddArrayToObject(j, "secrets") : NULL;
		src = list ? se : NULL;
		cJSON_ArrayForEach(it, src)
		{
			/* the ENV name is checked by the agent (dropped silently there) */
			const char *name = it->valuestring;
			if (!secret_name_ok(name) || !granted(name))
				continue; /* not granted: silently omitted, as the reference */
			char *v = read_secret(dir, name);
			if (!v)
				continue;
			cJSON *e = cJSON_CreateObject();
			cJSON_AddStringToObject(e, "env", it->string);
			cJSON_AddStringToObject(e, "name", name);
			cJSON_AddStringToObject(e, "value", v);
			cJSON_AddItemToArray(list, e);
			OPENSSL_cleanse(v, strlen(v));
			free(v);
		}
	}
	cJSON_Delete(se);
	if (r == 0) {
		*out = cJSON_PrintUnformatted(j);
		if (!*out)
			r = -ENOMEM;
		else
			*outlen = strlen(*out);
	}
	cJSON_Delete(j); /* (cJSON does not wipe its strings; they live as long as this request) */
	return r;
}
