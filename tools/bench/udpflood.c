/* UDP flood sender and counting receiver for tools/bench/run (IPv4 and IPv6).
 *
 * send DST PORT COUNT SECONDS [PPS [RUN]]
 *   Sends COUNT datagrams with sendmmsg (batches of 64) to an IPv4 or IPv6
 *   DST, IP packets of 64-200 bytes (IPv6: 20 more), cycling the TOS / Traffic
 *   Class over the 64 DSCPs (ECN 0; IP_TOS or IPV6_TCLASS per message), RUN
 *   (default 1) consecutive datagrams per DSCP, as packets of one flow follow
 *   each other. The first payload byte is the TOS sent. Stops after SECONDS at
 *   the latest. PPS > 0 paces the flood. Prints "sent START_NS END_NS"
 *   (CLOCK_MONOTONIC).
 * recv PORT EXPECT SECONDS IDLE_MS READYFILE [spin]
 *   Counts datagrams to PORT on IPv4 and IPv6 (one dual-stack socket) until
 *   IDLE_MS without one (after the first) or SECONDS. With "spin" it never
 *   sleeps in poll() but retries non-blocking reads, so no arriving datagram
 *   has a sleeping reader to wake.
 *   EXPECT is 64 comma-separated DSCPs (expected DSCP per DSCP sent) or "-".
 *   Prints "received dscp_ok dscp_bad first_ns last_ns".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define BATCH 64

static int do_send(int argc, char **argv)
{
	if (argc < 6)
		return 64;
	struct sockaddr_in dst4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
	struct sockaddr_in6 dst6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)atoi(argv[3]))};
	int v6 = strchr(argv[2], ':') != NULL;
	if (v6 ? inet_pton(AF_INET6, argv[2], &dst6.sin6_addr) != 1 : inet_pton(AF_INET, argv[2], &dst4.sin_addr) != 1)
		return 64;
	void *dst = v6 ? (void *)&dst6 : (void *)&dst4;
	socklen_t dstlen = v6 ? sizeof dst6 : sizeof dst4;
	long count = atol(argv[4]);
	uint64_t deadline = now_ns() + (uint64_t)atol(argv[5]) * 1000000000u;
	double pps = argc > 6 ? atof(argv[6]) : 0;
	long run = argc > 7 && atol(argv[7]) > 0 ? atol(argv[7]) : 1;
	int s = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM, 0);
	int sndbuf = 4 << 20;
	setsockopt(s, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf);
	static uint8_t payload[BATCH][200];
	static char cbuf[BATCH][CMSG_SPACE(sizeof(int))];
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	long sent = 0;
	uint64_t start = now_ns();
	while (sent < count && now_ns() < deadline) {
		int n = count - sent < BATCH ? (int)(count - sent) : BATCH;
		memset(msgs, 0, sizeof msgs);
		for (int i = 0; i < n; i++) {
			long k = sent + i;
			int tos = (int)(k / run % 64) << 2;
			/* IP total length 64..200: 20 IP + 8 UDP + 36..172 payload. */
			size_t len = 36 + (size_t)(k * 37 % 137);
			payload[i][0] = (uint8_t)tos;
			iov[i].iov_base = payload[i];
			iov[i].iov_len = len;
			msgs[i].msg_hdr.msg_name = dst;
			msgs[i].msg_hdr.msg_namelen = dstlen;
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
			msgs[i].msg_hdr.msg_control = cbuf[i];
			msgs[i].msg_hdr.msg_controllen = sizeof cbuf[i];
			struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr);
			c->cmsg_level = v6 ? IPPROTO_IPV6 : IPPROTO_IP;
			c->cmsg_type = v6 ? IPV6_TCLASS : IP_TOS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &tos, sizeof tos);
		}
		int r = sendmmsg(s, msgs, (unsigned)n, 0);
		if (r < 0) {
			usleep(100); /* ENOBUFS from a full qdisc: retry, still bounded by the deadline */
			continue;
		}
		sent += r;
		if (pps > 0) {
			uint64_t due = start + (uint64_t)((double)sent / pps * 1e9);
			uint64_t t = now_ns();
			if (due > t)
				usleep((useconds_t)((due - t) / 1000));
		}
	}
	printf("%ld %llu %llu\n", sent, (unsigned long long)start, (unsigned long long)now_ns());
	return 0;
}

static int do_recv(int argc, char **argv)
{
	if (argc < 7)
		return 64;
	int expect[64], check = strcmp(argv[3], "-") != 0;
	char *p = argv[3];
	for (int i = 0; check && i < 64; i++) {
		expect[i] = (int)strtol(p, &p, 10);
		if (*p == ',')
			p++;
	}
	uint64_t deadline = now_ns() + (uint64_t)atol(argv[4]) * 1000000000u;
	int idle_ms = atoi(argv[5]);
	int spin = argc > 7 && !strcmp(argv[7], "spin");
	int s = socket(AF_INET6, SOCK_DGRAM, 0);
	int one = 1, zero = 0, rcvbuf = 32 << 20;
	setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
	setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
	setsockopt(s, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
	setsockopt(s, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one);
	struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)atoi(argv[2])),
				 .sin6_addr = IN6ADDR_ANY_INIT};
	if (bind(s, (struct sockaddr *)&a, sizeof a) < 0) {
		perror("bind");
		return 1;
	}
	FILE *f = fopen(argv[6], "w");
	if (f)
		fclose(f);
	static uint8_t bufs[BATCH][256];
	static char cbufs[BATCH][CMSG_SPACE(sizeof(int)) * 2];
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	long got = 0, ok = 0, bad = 0;
	uint64_t first = 0, last = 0;
	for (;;) {
		uint64_t t = now_ns();
		if (t >= deadline)
			break;
		if (spin) {
			if (got && t - last > (uint64_t)idle_ms * 1000000u)
				break;
		} else {
			int wait = got ? idle_ms : (int)((deadline - t) / 1000000u) + 1;
			struct pollfd pfd = {.fd = s, .events = POLLIN};
			if (poll(&pfd, 1, wait) <= 0)
				break;
		}
		memset(msgs, 0, sizeof msgs);
		for (int i = 0; i < BATCH; i++) {
			iov[i].iov_base = bufs[i];
			iov[i].iov_len = sizeof bufs[i];
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
			msgs[i].msg_hdr.msg_control = cbufs[i];
			msgs[i].msg_hdr.msg_controllen = sizeof cbufs[i];
		}
		int n = recvmmsg(s, msgs, BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			continue;
		last = now_ns();
		if (!got)
			first = last;
		got += n;
		for (int i = 0; check && i < n; i++) {
			int tos = -1;
			for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c))
				if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS)
					tos = *(uint8_t *)CMSG_DATA(c);
				else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS)
					tos = *(int *)CMSG_DATA(c);
			int sent = bufs[i][0];
			if (tos >= 0 && tos >> 2 == expect[sent >> 2] && (tos & 3) == (sent & 3))
				ok++;
			else
				bad++;
		}
	}
	printf("%ld %ld %ld %llu %llu\n", got, ok, bad, (unsigned long long)first, (unsigned long long)last);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "send"))
		return do_send(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "recv"))
		return do_recv(argc, argv);
	fprintf(stderr, "usage: %s send DST PORT COUNT SECONDS [PPS [RUN]] | recv PORT EXPECT SECONDS IDLE_MS READYFILE\n",
		argv[0]);
	return 64;
}
