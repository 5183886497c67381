/* SPDX-License-Identifier: Apache-2.0 */
/* The cri lane's pause image: built with `gcc -static`, holds the pod's
 * namespaces open and reaps orphans until SIGTERM/SIGINT. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void bye(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(void)
{
	signal(SIGTERM, bye);
	signal(SIGINT, bye);
	signal(SIGCHLD, reap);
	for (;;)
		pause();
}
