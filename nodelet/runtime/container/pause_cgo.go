//go:build linux && cgo

package container

/*
#cgo CFLAGS: -Wall -O2
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

// The pause process: see pause in reexec.go, which this does before the Go
// runtime starts, so that a sandbox costs an exec and a few system calls
// instead of booting the Go runtime and every package's init of a large
// binary. It acts only when argv[1] is "sluice-pause"; otherwise it returns
// having done nothing but read /proc/self/cmdline.

static void sluice_pause_fail(const char *what) {
	dprintf(1, "%s: %s\n", what, strerror(errno));
	_exit(1);
}

__attribute__((constructor)) static void sluice_pause(void) {
	static const char arg[] = "sluice-pause";
	char buf[4096];
	size_t len = 0;
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += n;
		if (len == sizeof(buf) - 1)
			break;
	}
	close(fd);
	buf[len] = '\0';
	// argv[0] ends at the first NUL; argv[1] and argv[2] follow.
	size_t a1 = strnlen(buf, len) + 1;
	if (a1 >= len || strcmp(buf + a1, arg) != 0)
		return;
	size_t a2 = a1 + sizeof(arg);
	const char *host = a2 < len ? buf + a2 : NULL;

	// As PID 1 of a shared PID namespace it is the reaper of the
	// namespace's orphans: it waits for SIGCHLD too, and reaps.
	int reaper = getpid() == 1;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (reaper)
		sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);

	if (host != NULL && sethostname(host, strlen(host)) < 0)
		sluice_pause_fail("sethostname");
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		sluice_pause_fail("bring up lo: socket");
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		sluice_pause_fail("bring up lo: get flags");
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		sluice_pause_fail("bring up lo: set flags");
	close(s);
	if (write(1, "ok\n", 3) != 3)
		_exit(1);
	close(1);
	for (;;) {
		int sig;
		if (sigwait(&set, &sig) != 0)
			continue;
		if (sig != SIGCHLD)
			_exit(0);
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
}
*/
import "C"
