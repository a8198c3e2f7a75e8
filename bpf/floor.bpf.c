// SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0)
/*
 * The floor of the kernel bench: programs on the same hooks as Canopy's that
 * do nothing. What the kernel charges to any program run (the stats clock,
 * the context setup) is their run time; Canopy's cost is measured above it.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("cgroup/connect4")
int floor_connect4(struct bpf_sock_addr *ctx)
{
	return 1;
}

SEC("cgroup/sendmsg4")
int floor_sendmsg4(struct bpf_sock_addr *ctx)
{
	return 1;
}
