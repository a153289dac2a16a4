/* consumer/runcmd.c: operator commands with a timeout and captured output (see
 * consumer/runcmd.h). */
#include "consumer/runcmd.h"
#include "sdnotify.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int runcmd(const char *cmd, const char *const *env, double timeout_s, struct runcmd_result *res,
	   char *err, size_t errlen)
{
	memset(res, 0, sizeof(*res));
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "cannot run '%s': %s", cmd, strerror(errno));
		return -1;
	}
	/* the environment: ours plus env */
	size_t n = 0, extra = 0;
	while (environ[n])
		n++;
	while (env && env[extra])
		extra++;
	char **envp = xcalloc(n + extra + 1, sizeof(char *));
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		bool replaced = false;
		for (size_t j = 0; j < extra && !replaced; j++) {
			size_t nl = strcspn(env[j], "=");
			replaced = strncmp(environ[i], env[j], nl + 1) == 0;
		}
		if (!replaced)
			envp[k++] = environ[i];
	}
	for (size_t j = 0; j < extra; j++)
		envp[k++] = (char *)env[j];

	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
	posix_spawnattr_init(&at);
	posix_spawnattr_setpgroup(&at, 0);
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	char *argv[] = { "/bin/sh", "-c", (char *)cmd, NULL };
	pid_t pid;
	int rc = posix_spawn(&pid, "/bin/sh", &fa, &at, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	free(envp);
	close(pfd[1]);
	if (rc != 0) {
		close(pfd[0]);
		snprintf(err, errlen, "cannot run '%s': %s", cmd, strerror(rc));
		return -1;
	}

	/* read its output until it exits (not until the pipe closes: a
	 * daemon it starts may keep the pipe open) or the timeout. Its exit
	 * is an event (a pidfd turns readable), so nothing sleeps; a kernel
	 * without pidfd_open (before 5.3) gets a 50 ms poll instead */
	size_t got = 0;
	int status = 0;
	bool exited = false;
	int64_t deadline = now_ms() + (int64_t)(timeout_s * 1000);
	fcntl(pfd[0], F_SETFL, O_NONBLOCK);
	int xfd = pidfd_open(pid, 0);
	bool eof = false;
	for (;;) {
		char chunk[1024];
		ssize_t r;
		while (!eof && (r = read(pfd[0], chunk, sizeof(chunk))) >= 0) {
			if (r == 0) {
				eof = true;   /* closed its output; may still run */
				break;
			}
			size_t room = sizeof(res->output) - 1 - got;
			size_t take = (size_t)r < room ? (size_t)r : room;
			memcpy(res->output + got, chunk, take);
			got += take;
		}
		if (exited)
			break;
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid) {
			exited = true;
			continue;   /* one more read for what it wrote last */
		}
		int64_t left = deadline - now_ms();
		if (left <= 0) {
			res->timed_out = 1;
			kill(-pid, SIGKILL);
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			break;
		}
		/* a wait bounded by the timeout: the event loop is still alive */
		sdnotify_watchdog_tick();
		/* its output or its exit, whichever comes first (after EOF the
		 * pipe polls readable forever: it is left out) */
		struct pollfd p[2] = { { eof ? -1 : pfd[0], POLLIN, 0 }, { xfd, POLLIN, 0 } };
		int cap = xfd >= 0 ? 1000 : 50;   /* the watchdog's tick, or the old poll */
		poll(p, 2, (int)(left > cap ? cap : left));
	}
	if (xfd >= 0)
		close(xfd);
	close(pfd[0]);
	res->output[got] = '\0';
	str_trim(res->output);
	if (WIFEXITED(status)) {
		res->exit_code = WEXITSTATUS(status);
	} else {
		res->exit_code = -1;
		res->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	}
	return 0;
}

void runcmd_describe(const struct runcmd_result *res, char *out, size_t cap)
{
	if (res->timed_out)
		snprintf(out, cap, "timed out%s%s", res->output[0] ? ": " : "", res->output);
	else if (res->exit_code < 0)
		snprintf(out, cap, "killed by signal %d%s%s", res->signal, res->output[0] ? ": " : "", res->output);
	else
		snprintf(out, cap, "exit %d%s%s", res->exit_code, res->output[0] ? ": " : "", res->output);
}
