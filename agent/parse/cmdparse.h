/* SPDX-License-Identifier: Apache-2.0 */
/* Command allowlist, layer 1 of 2: a strict checker for the `/bin/sh -c`
 * command strings of a session with allowed_commands (issue 8). Layer 2 is
 * the kernel (agent/isolate/landlock.h): whatever this file accepts still runs with
 * execute rights only on the allowed binaries, /bin/sh and the loader.
 *
 * This is not a shell parser. It accepts a small subset of POSIX sh whose
 * meaning is the same in dash, bash (also as sh) and busybox ash, and
 * refuses everything else with a stable reason code:
 *
 *   accepted   plain words; '...' (anything printable inside, '$' included:
 *              awk '{print $1}'); "..." without expansion (\" and \\ are
 *              escapes, any other backslash is literal as in POSIX, '$' and
 *              '`' are refused); \c outside quotes for printable ASCII c;
 *              pipelines '|', lists '&&' '||' ';' (one trailing ';');
 *              redirections  [n]> [n]>> [n]< with n in 0..2, [n]>&m and
 *              [n]<&m with m in 0..2 or '-'; targets inside the allowed roots
 *              (writes: /workspace /tmp /mnt/user-data/outputs; reads: those
 *              plus /mnt/user-data/uploads /mnt/skills; relative to the cwd
 *              of the exec; no '..'), or /dev/null (and a few /dev files).
 *   refused    see the BK_CMD_R_* codes below.
 *
 * Each simple command's first word (after quote removal) must be the name,
 * or a path ending in the name, of an allowed_commands entry, and must
 * resolve (through the caller's resolver: PATH of the sandbox, in the
 * sandbox's mount namespace) to the same file that entry resolved to when
 * the policy was built. Name and resolved file are checked as a pair, so a
 * copy or symlink named "ls" that is something else is refused, and on a
 * multi-call binary (busybox) "sh" is refused although it is the same file
 * as the allowed "ls".
 *
 * Pure function: no I/O but the resolver callback, bounded input, no
 * recursion; fuzzed by tests/fuzz/fuzz-cmdparse.c. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define BK_CMD_MAX_LEN (64 * 1024) /* bytes of a command string */
#define BK_CMD_MAX_WORDS 256       /* words (command words, arguments, targets) */
#define BK_CMD_MAX_TOKENS 1024     /* words + operators */
#define BK_CMD_KEY_MAX 4096        /* bytes of a resolver answer */

/* Reason codes (res->code): stable strings, part of the API. */
#define BK_CMD_OK "ok"
#define BK_CMD_R_TOO_LONG "too_long"                         /* -E2BIG */
#define BK_CMD_R_TOO_MANY_WORDS "too_many_words"             /* -E2BIG */
#define BK_CMD_R_EMPTY "empty"                               /* -EINVAL: nothing to run */
#define BK_CMD_R_UNTERMINATED_QUOTE "unterminated_quote"     /* -EINVAL */
#define BK_CMD_R_NUL "nul_byte"                              /* (length-taking callers) */
#define BK_CMD_R_NEWLINE "newline"                           /* \n or \r anywhere */
#define BK_CMD_R_ESCAPED_NEWLINE "escaped_newline"
#define BK_CMD_R_CONTROL_CHAR "control_char"                 /* < 0x20 but tab, 0x7f */
#define BK_CMD_R_NON_ASCII "non_ascii"                       /* outside quotes, in a command word */
#define BK_CMD_R_INVALID_UTF8 "invalid_utf8"                 /* inside quotes */
#define BK_CMD_R_UNICODE_FORMAT "unicode_format"             /* C1, bidi, zero-width, tags */
#define BK_CMD_R_BACKSLASH "backslash_escape"                /* trailing '\' */
#define BK_CMD_R_COMMAND_SUBST "command_substitution"        /* $( ` $(( */
#define BK_CMD_R_PROCESS_SUBST "process_substitution"        /* <( >( */
#define BK_CMD_R_PARAM_EXPANSION "parameter_expansion"       /* any other '$' outside '...' */
#define BK_CMD_R_TILDE "tilde_expansion"
#define BK_CMD_R_COMMENT "comment"
#define BK_CMD_R_HEREDOC "heredoc"                           /* << <<- <<< */
#define BK_CMD_R_SUBSHELL "subshell"                         /* ( ) */
#define BK_CMD_R_BRACE "brace_group"                         /* { } unquoted (also bash brace expansion) */
#define BK_CMD_R_BACKGROUND "background"                     /* & &> |& */
#define BK_CMD_R_EMPTY_COMMAND "empty_command"               /* ;; leading | trailing && ... */
#define BK_CMD_R_REDIR_FD "redirection_fd"                   /* fd not 0..2 */
#define BK_CMD_R_REDIR_UNSUPPORTED "redirection_unsupported" /* <> >| */
#define BK_CMD_R_REDIR_TARGET "redirection_target"           /* outside the roots, missing */
#define BK_CMD_R_REDIR_READONLY "redirection_readonly"       /* write into a read-only root */
#define BK_CMD_R_REDIR_GLOB "redirection_glob"
#define BK_CMD_R_DOTDOT "path_dotdot"
#define BK_CMD_R_ASSIGNMENT "assignment"                     /* NAME=value in command position */
#define BK_CMD_R_GLOB_COMMAND "glob_command"                 /* * ? [ in the command word */
#define BK_CMD_R_RESERVED "reserved_word"                    /* if for while case ! [[ ... */
#define BK_CMD_R_EVAL "eval"                                 /* eval trap fc */
#define BK_CMD_R_EXEC "exec"
#define BK_CMD_R_SOURCE "source"                             /* source . */
#define BK_CMD_R_BUILTIN_PREFIX "builtin_prefix"             /* command builtin */
#define BK_CMD_R_WRAPPER "wrapper"                           /* env nohup time timeout nice xargs sudo ... */
#define BK_CMD_R_SHELL_STATE "shell_state"                   /* export read cd alias hash set ... */
#define BK_CMD_R_FIND_ACTION "find_action"                   /* find -exec -execdir -ok -delete -fprint ... */
#define BK_CMD_R_FIND_GLOB "find_glob"                       /* unquoted glob in find's arguments */
#define BK_CMD_R_NOT_ALLOWED "not_allowed"                   /* not in allowed_commands */
#define BK_CMD_R_NOT_FOUND "command_not_found"               /* resolver: -ENOENT */
#define BK_CMD_R_RESOLVE "resolve_error"                     /* resolver: other error */
#define BK_CMD_R_NOMEM "out_of_memory"                       /* -ENOMEM */

/* Resolve a command word (after quote removal: "ls", "/usr/bin/ls",
 * "./tool") the way /bin/sh of the exec will (PATH search for a word
 * without '/', relative to the exec's cwd otherwise), in the sandbox's
 * mount namespace, and write a key naming the file it finds. The key is
 * compared with strcmp only: the canonical absolute path (all symlinks
 * resolved) or "dev:ino" are both fine, as long as the policy's real[]
 * entries come from the same resolver. Returns 0, -ENOENT when there is no
 * such command, another -errno on failure (the command is then refused). */
typedef int (*bk_cmd_resolve_fn)(void *ud, const char *word, char *out, size_t outlen);

struct bk_cmd_policy {
	/* allowed_commands: names[i] (no '/') and real[i], the key its
	 * resolver gave when the policy was built (NULL when the name did not
	 * resolve: it then allows nothing). */
	const char *const *names;
	const char *const *real;
	size_t n;
	bk_cmd_resolve_fn resolve;
	void *ud;
	/* virtual working directory of the exec, for relative redirection
	 * targets; NULL means "/workspace" */
	const char *cwd;
};

struct bk_cmd_result {
	const char *code;  /* BK_CMD_OK or a BK_CMD_R_* string (static) */
	char reason[256];  /* one human sentence, printable ASCII */
	size_t offset;     /* byte offset in the command of the refused construct */
	unsigned n_commands; /* simple commands checked (when accepted) */
};

/* Check cmd (NUL-terminated) against the policy. Returns 0 when every
 * simple command is allowed, else a negative errno and res filled:
 *   -EPERM   a refused construct or command (most codes)
 *   -EINVAL  not a command at all (empty, unterminated quote)
 *   -E2BIG   over BK_CMD_MAX_LEN bytes or BK_CMD_MAX_WORDS words
 *   -ENOMEM
 * The resolver is called only when the whole string passed the lexical and
 * structural checks, at most once per simple command. */
int bk_cmd_check(const char *cmd, const struct bk_cmd_policy *pol, struct bk_cmd_result *res);

/* The same for a buffer that may hold NUL bytes (refused: BK_CMD_R_NUL). */
int bk_cmd_check_n(const char *cmd, size_t len, const struct bk_cmd_policy *pol, struct bk_cmd_result *res);
