/* SPDX-License-Identifier: Apache-2.0 */
/* clone3 with the child on a stack of its own (args->stack): it calls
 * fn(arg) there and ends with its return value. glibc has no clone3
 * wrapper that takes a function; this is its x86-64 core. Used by the
 * exec spawn (agent/isolate/child.c, spawn_direct) and by the bench's
 * kernel floor (tests/tools/bk-bench.c), which must spawn as it does. */
#pragma once
#if defined(__x86_64__)
#include <linux/sched.h>
#include <sys/syscall.h>

static inline long bk_clone3_fn(struct clone_args *args, int (*fn)(void *), void *arg)
{
	long ret;
	register void *r12 __asm__("r12") = (void *)fn;
	register void *r13 __asm__("r13") = arg;
	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "xor %%ebp, %%ebp\n\t"
			 "mov %%r13, %%rdi\n\t"
			 "call *%%r12\n\t"
			 "mov %%eax, %%edi\n\t"
			 "mov %[nr_exit], %%eax\n\t"
			 "syscall\n\t"
			 "hlt\n"
			 "1:"
			 : "=a"(ret)
			 : "a"((long)SYS_clone3), "D"(args), "S"(sizeof(*args)), "r"(r12), "r"(r13),
			   [nr_exit] "i"(SYS_exit)
			 : "rcx", "r11", "memory");
	return ret;
}
#endif
