/* SPDX-License-Identifier: Apache-2.0 */
/* rxbound.h: the cost of a grep pattern before it compiles. A recursive
 * descent over ERE syntax (alternation, concatenation, pieces with
 * quantifiers, groups, bracket expressions, escapes) that only counts. */
#include "agent/parse/rxbound.h"
#include "lib/err.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define CAP (UINT64_C(1) << 40) /* saturation: far above any bound */
#define DUP_MAX 32767           /* glibc's RE_DUP_MAX: larger counts do not compile */

struct rx {
	const char *p;
	struct bk_rx_cost *c;
};

struct piece {
	uint64_t size;
	int nest;
};

static uint64_t sat_add(uint64_t a, uint64_t b) { return a + b > CAP ? CAP : a + b; }
static uint64_t sat_mul(uint64_t a, uint64_t b)
{
	if (a == 0 || b == 0)
		return 0;
	return a > CAP / b ? CAP : a * b;
}

static struct piece alt(struct rx *x, int depth);

/* [...]: one position; the end is past the closing ']' (or the end of
 * the text when there is none: regcomp refuses it). */
static void bracket(struct rx *x)
{
	const char *p = x->p + 1;
	if (*p == '^')
		p++;
	if (*p == ']')
		p++; /* a leading ']' is a member */
	while (*p && *p != ']') {
		if (*p == '\\' && p[1]) { /* Python, PCRE: an escape inside a class */
			p += 2;
			continue;
		}
		if (*p == '[' && (p[1] == ':' || p[1] == '=' || p[1] == '.')) {
			char k = p[1];
			const char *e = p + 2;
			while (*e && !(e[0] == k && e[1] == ']'))
				e++;
			p = *e ? e + 2 : e;
			continue;
		}
		p++;
	}
	x->p = *p ? p + 1 : p;
}

static bool digit(char c) { return c >= '0' && c <= '9'; }

static uint64_t number(const char **pp)
{
	uint64_t v = 0;
	while (digit(**pp)) {
		if (v <= DUP_MAX)
			v = v * 10 + (uint64_t)(**pp - '0');
		(*pp)++;
	}
	return v;
}

/* An interval at x->p ('{'): *copies the copies glibc makes of its
 * operand; false (nothing consumed) when it is not a valid interval. */
static bool interval(struct rx *x, uint64_t *copies)
{
	const char *p = x->p + 1;
	bool have_min = digit(*p);
	uint64_t lo = number(&p), hi;
	bool unbounded = false;
	if (*p == ',') {
		p++;
		if (digit(*p))
			hi = number(&p);
		else
			unbounded = true, hi = lo;
	} else {
		if (!have_min)
			return false;
		hi = lo;
	}
	if (*p != '}')
		return false;
	x->p = p + 1;
	/* m copies, then (n - m) optional ones, or one starred */
	uint64_t n = unbounded ? lo + 1 : (hi > lo ? hi : lo);
	*copies = n ? n : 1;
	return true;
}

/* One atom: a group, a bracket expression, an escape or a character. */
static struct piece atom(struct rx *x, int depth)
{
	struct piece a = { 1, 0 };
	char ch = *x->p;
	if (ch == '(') {
		x->p++;
		if (depth + 1 > x->c->groups)
			x->c->groups = depth + 1;
		if (depth + 1 > BK_RX_GROUP_MAX) {
			/* deeper than the bound: refused; stop measuring here */
			x->p += strlen(x->p);
			return a;
		}
		a = alt(x, depth + 1);
		if (*x->p == ')')
			x->p++;
		if (a.size == 0)
			a.size = 1;
	} else if (ch == '[') {
		bracket(x);
	} else if (ch == '\\') {
		x->p++;
		if (*x->p >= '1' && *x->p <= '9')
			x->c->backrefs++; /* counted; PCRE2's match limits bound them */
		if (*x->p)
			x->p++;
	} else {
		x->p++;
	}
	return a;
}

/* A concatenation of pieces, up to '|', ')' or the end. */
static struct piece seq(struct rx *x, int depth)
{
	struct piece s = { 0, 0 };
	while (*x->p && *x->p != '|' && !(*x->p == ')' && depth > 0)) {
		struct piece a = atom(x, depth);
		for (;;) {
			char q = *x->p;
			uint64_t copies;
			if (q == '*' || q == '?') {
				x->p++;
			} else if (q == '+') {
				x->p++;
				a.size = sat_mul(a.size, 2); /* X+ is X X* */
			} else if (q == '{' && interval(x, &copies)) {
				a.size = sat_mul(a.size, copies);
			} else {
				break;
			}
			/* a lazy or possessive mark is no repetition of its own */
			if (*x->p == '?' || *x->p == '+')
				x->p++;
			a.nest++;
		}
		s.size = sat_add(s.size, a.size);
		if (a.nest > s.nest)
			s.nest = a.nest;
	}
	return s;
}

static struct piece alt(struct rx *x, int depth)
{
	struct piece r = seq(x, depth);
	while (*x->p == '|') {
		x->p++;
		struct piece s = seq(x, depth);
		r.size = sat_add(sat_add(r.size, s.size), 1);
		if (s.nest > r.nest)
			r.nest = s.nest;
	}
	return r;
}

void bk_rx_measure(const char *pattern, struct bk_rx_cost *c)
{
	memset(c, 0, sizeof(*c));
	c->len = strlen(pattern);
	struct rx x = { .p = pattern, .c = c };
	struct piece total = { 0, 0 };
	while (*x.p) {
		struct piece r = alt(&x, 0);
		total.size = sat_add(total.size, r.size);
		if (r.nest > total.nest)
			total.nest = r.nest;
		if (*x.p == ')') /* unmatched: an ordinary character to measure */
			x.p++, total.size = sat_add(total.size, 1);
	}
	c->size = total.size;
	c->nest = total.nest;
}

int bk_rx_check(const char *pattern, char *err, size_t errlen)
{
	struct bk_rx_cost c;
	if (strlen(pattern) > BK_RX_LEN_MAX)
		return bk_fail_buf(err, errlen, -E2BIG, "the pattern is longer than %d bytes", BK_RX_LEN_MAX);
	bk_rx_measure(pattern, &c);
	if (c.groups > BK_RX_GROUP_MAX)
		return bk_fail_buf(err, errlen, -E2BIG, "the pattern nests groups deeper than %d levels",
				   BK_RX_GROUP_MAX);
	if (c.nest > BK_RX_NEST_MAX)
		return bk_fail_buf(err, errlen, -E2BIG, "the pattern nests repetitions %d deep (at most %d)", c.nest,
				   BK_RX_NEST_MAX);
	if (c.size > BK_RX_SIZE_MAX)
		return bk_fail_buf(err, errlen, -E2BIG,
				   "the pattern expands to %s%llu positions once its repetitions are copied out (at most %d)",
				   c.size >= CAP ? "more than " : "", (unsigned long long)c.size, BK_RX_SIZE_MAX);
	return 0;
}

static bool hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static bool hexes(const char *p, int n)
{
	for (int i = 0; i < n; i++)
		if (!hex(p[i]))
			return false;
	return true;
}

int bk_rx_translate(const char *py, char *out, size_t outlen)
{
	size_t o = 0;
	bool cls = false;
#define PUT(c)                                  \
	do {                                    \
		if (o + 1 >= outlen)            \
			return -E2BIG;          \
		out[o++] = (c);                 \
	} while (0)
	for (const char *p = py; *p; p++) {
		if (*p == '\\' && p[1]) {
			char e = p[1];
			int nh = e == 'u' ? 4 : e == 'U' ? 8 : 0;
			if (nh && hexes(p + 2, nh)) {
				/* \uXXXX, \UXXXXXXXX: \x{...} */
				PUT('\\');
				PUT('x');
				PUT('{');
				for (int i = 0; i < nh; i++)
					PUT(p[2 + i]);
				PUT('}');
				p += 1 + nh;
				continue;
			}
			PUT('\\');
			PUT(!cls && e == 'Z' ? 'z' : e); /* Python's \Z is PCRE2's \z */
			p++;
			continue;
		}
		if (cls) {
			if (*p == ']')
				cls = false;
			PUT(*p);
			continue;
		}
		if (*p == '[') {
			cls = true;
			PUT(*p);
			/* "[]" and "[^]" start with a literal ']' */
			if (p[1] == '^')
				PUT(*++p);
			if (p[1] == ']')
				PUT(*++p);
			continue;
		}
		if (*p == '{' && p[1] == ',') {
			/* Python's {,n} is {0,n} (PCRE2 10.42 reads "{," literally) */
			const char *q = p + 2;
			while (*q >= '0' && *q <= '9')
				q++;
			if (q > p + 2 && *q == '}') {
				PUT('{');
				PUT('0');
				continue;
			}
		}
		PUT(*p);
	}
#undef PUT
	out[o] = '\0';
	return 0;
}
