// SPDX-License-Identifier: Apache-2.0
/*
 * connect() cost, for `npm run bench`: N times socket(AF_INET or AF_INET6,
 * SOCK_DGRAM), connect() to ADDR:PORT, close(). A UDP connect runs the cgroup
 * connect4/connect6 program like a TCP one but sends nothing, so the time is the syscall and
 * the program. Prints the mean ns per connect() call (connect alone, timed
 * around the call).
 *
 * With "sendto" as a fourth argument, each socket instead sends one byte with
 * sendto() to ADDR:PORT (unconnected UDP: the cgroup sendmsg4/sendmsg6 program
 * runs) and the time is that of the sendto() call.
 *
 * usage: connect-bench ADDR PORT N [sendto]
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6 };
	struct sockaddr *addr = (struct sockaddr *)&sa;
	socklen_t len = sizeof(sa);
	int family = AF_INET;
	int sendto_mode = argc == 5 && strcmp(argv[4], "sendto") == 0;
	long long total = 0;
	long n, failed = 0;

	if ((argc == 4 || sendto_mode) && inet_pton(AF_INET6, argv[1], &sa6.sin6_addr) == 1) {
		family = AF_INET6;
		addr = (struct sockaddr *)&sa6;
		len = sizeof(sa6);
	} else if (!(argc == 4 || sendto_mode) || inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
		fprintf(stderr, "usage: connect-bench ADDR PORT N [sendto]\n");
		return 2;
	}
	sa.sin_port = htons((unsigned short)atoi(argv[2]));
	sa6.sin6_port = sa.sin_port;
	n = atol(argv[3]);
	for (long i = 0; i < n; i++) {
		int fd = socket(family, SOCK_DGRAM, 0);
		long long t0;
		int rc;

		if (fd < 0) {
			perror("socket");
			return 1;
		}
		t0 = now_ns();
		rc = sendto_mode ? (sendto(fd, "x", 1, 0, addr, len) == 1 ? 0 : -1) : connect(fd, addr, len);
		if (rc != 0)
			failed++;
		total += now_ns() - t0;
		close(fd);
	}
	printf("{\"n\":%ld,\"failed\":%ld,\"ns_per_connect\":%.1f}\n", n, failed, (double)total / (double)n);
	return 0;
}
