// SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0)
/*
 * Canopy's kernel datapath: on connect() to a service VIP, walk the service's
 * compiled locality tree with the caller's locality and send the connection
 * to a backend of the deepest matched node.
 *
 * Map lookups per VIP connect, at most: 1 service + 2 workload locality
 * (the cgroup's own entry, else the node default) + depth tree levels
 * + 1 endpoint + 1 stats = depth + 5 (13 at the maximum depth of 8).
 * A connect to anything else costs 1 lookup. There is no loop over endpoints.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "canopy_abi.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, CANOPY_MAX_SERVICES);
	__type(key, struct canopy_svc_key);
	__type(value, struct canopy_svc);
} canopy_services SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, CANOPY_MAX_SERVICES);
	__type(key, struct canopy_svc_key6);
	__type(value, struct canopy_svc);
} canopy_services6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, CANOPY_MAX_NODES);
	__type(key, struct canopy_node_key);
	__type(value, struct canopy_node);
} canopy_nodes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CANOPY_MAX_ENDPOINTS);
	__type(key, __u32);
	__type(value, struct canopy_backend);
} canopy_endpoints SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, CANOPY_MAX_WORKLOADS);
	__type(key, __u64);
	__type(value, struct canopy_locality);
} canopy_workloads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CANOPY_MAX_SCOPES);
	__type(key, __u32);
	__type(value, __u64);
} canopy_scopes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct canopy_config);
} canopy_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct canopy_stats);
} canopy_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct canopy_peer);
} canopy_peers SEC(".maps");

struct canopy_result {
	__u32 ip;
	__u16 port;
	__u32 matched;
	__u32 lookups;
	__u32 slot; /* the chosen endpoint slot */
};

/*
 * A weighted pick in the layout at `base`, range [base + start, + count):
 * r falls in [cum(start - 1), cum(start + count - 1)), and the slot is the
 * first whose cum exceeds r (a bounded binary search: log2(count) + 2 lookups).
 * A global function, so the verifier checks it once rather than once per
 * path through the tree walk. Returns lookups << 32 | slot, or 0 when the
 * endpoint map does not hold what the agent wrote.
 */
__attribute__((noinline)) __u64 canopy_weighted(__u32 base, __u32 start, __u32 count, __u32 rnd)
{
	struct canopy_backend *be;
	__u32 lo = base + start, hi = lo + count - 1, before = 0, total, r, key;
	__u64 lookups = 1;
	int k;

	if (count == 0)
		return 0;
	if (start > 0) {
		key = lo - 1;
		lookups++;
		be = bpf_map_lookup_elem(&canopy_endpoints, &key);
		if (!be)
			return 0;
		before = be->cum;
	}
	key = hi;
	be = bpf_map_lookup_elem(&canopy_endpoints, &key);
	if (!be || be->cum <= before)
		return 0;
	total = be->cum - before;
	r = before + rnd % total;
	for (k = 0; k < CANOPY_WEIGHT_STEPS && lo < hi; k++) {
		key = lo + (hi - lo) / 2;
		be = bpf_map_lookup_elem(&canopy_endpoints, &key);
		if (!be)
			return 0;
		if (be->cum > r)
			hi = key;
		else
			lo = key + 1;
	}
	return (lookups + k) << 32 | lo;
}

/*
 * The locality of the nearest ancestor cgroup with a workload entry, looking
 * only at the levels where the agent has put entries (canopy_config).
 */
static __always_inline struct canopy_locality *canopy_ancestor_locality(struct canopy_result *res)
{
	struct canopy_config *cfg;
	struct canopy_locality *loc;
	__u32 zero = 0, levels;
	__u64 id;
	int l;

	res->lookups++;
	cfg = bpf_map_lookup_elem(&canopy_config, &zero);
	if (!cfg || cfg->workload_levels == 0)
		return 0;
	levels = cfg->workload_levels;
	for (l = 31; l >= 0; l--) {
		if (!(levels & (1u << l)))
			continue;
		id = bpf_get_current_ancestor_cgroup_id(l);
		if (id == 0)
			continue; /* deeper than the caller */
		res->lookups++;
		loc = bpf_map_lookup_elem(&canopy_workloads, &id);
		if (loc)
			return loc;
	}
	return 0;
}

/*
 * The selection, shared by the connect4 program and the test-run harness.
 * Returns an enum canopy_verdict; on CANOPY_REWRITE, res holds the backend.
 *
 * `live` is a compile-time constant: connect4 passes 1 and the cgroup id and
 * the random number are read only once the destination is known to be a
 * service VIP, so a connect to anything else costs one map lookup and no
 * helper call. The test harness passes 0 and supplies both.
 */
static __always_inline int canopy_pick(const struct canopy_svc *svcp, __u64 cgroup, __u32 rnd, const int live,
				       struct canopy_result *res)
{
	struct canopy_svc svc;
	struct canopy_locality *loc = 0;
	__u32 start = 0, count, slot, base;
	__u64 zero_cg = 0;
	int i;

	/* One copy: later reads see this version even if the entry is replaced meanwhile. */
	__builtin_memcpy(&svc, svcp, sizeof(svc));
	count = svc.ep_count;
	base = svc.ep_base;

	if (svc.mode != CANOPY_MODE_RANDOM && svc.depth > 0) {
		if (live)
			cgroup = bpf_get_current_cgroup_id();
		res->lookups++;
		loc = bpf_map_lookup_elem(&canopy_workloads, &cgroup);
		if (!loc && live)
			loc = canopy_ancestor_locality(res);
		if (!loc && cgroup != 0) {
			res->lookups++;
			loc = bpf_map_lookup_elem(&canopy_workloads, &zero_cg);
		}
	}

	if (loc) {
		struct canopy_node_key nkey = { .tree = svc.tree, .parent = 0, .value = 0 };
		for (i = 0; i < CANOPY_MAX_DEPTH; i++) {
			struct canopy_node *node;
			__u32 scope;
			__u64 value;

			if (i >= svc.depth)
				break;
			scope = svc.level_scope[i] & (CANOPY_MAX_SCOPES - 1);
			value = loc->value[scope];
			if (value == 0)
				break;
			nkey.value = value;
			res->lookups++;
			node = bpf_map_lookup_elem(&canopy_nodes, &nkey);
			if (!node || node->count == 0) {
				/* No backend in the caller's network: rank every network's
				 * backends by the remaining levels, in the merged tree. */
				if (i == 0 && svc.mode == CANOPY_MODE_NETWORK_FIRST) {
					nkey.parent = CANOPY_ALT_ROOT;
					base = svc.alt_base;
					continue;
				}
				break;
			}
			start = node->start;
			count = node->count;
			nkey.parent = node->id;
			res->matched = i + 1;
		}
	}

	if (svc.mode == CANOPY_MODE_STRICT && res->matched < svc.depth)
		return CANOPY_REFUSE;
	if (count == 0)
		return CANOPY_REFUSE;

	if (live)
		rnd = bpf_get_prandom_u32();
	if (svc.flags & CANOPY_SVC_WEIGHTED) {
		__u64 picked = canopy_weighted(base, start, count, rnd);

		if (!picked)
			return CANOPY_REFUSE;
		slot = (__u32)picked;
		res->lookups += picked >> 32;
	} else {
		slot = base + start + rnd % count;
	}
	res->slot = slot;
	return CANOPY_REWRITE;
}

/* IPv4: the service of vip:port, a pick in its tree, and the chosen backend's address. */
static __always_inline int canopy_select(__u32 vip, __u16 port, __u64 cgroup, __u32 rnd, const int live,
					 struct canopy_result *res)
{
	struct canopy_svc_key skey = { .vip = vip, .port = port, .pad = 0 };
	struct canopy_svc *svcp;
	__u32 slot;
	int verdict;

	res->lookups = 1;
	res->matched = 0;
	svcp = bpf_map_lookup_elem(&canopy_services, &skey);
	if (!svcp)
		return CANOPY_PASS;
	verdict = canopy_pick(svcp, cgroup, rnd, live, res);
	if (verdict != CANOPY_REWRITE)
		return verdict;
	slot = res->slot;
	res->lookups++;
	struct canopy_backend *be = bpf_map_lookup_elem(&canopy_endpoints, &slot);
	if (!be)
		return CANOPY_REFUSE;
	/* ip and port in one 8-byte load: the agent rewrites a live slot in place
	 * (O(change) republish), and this read takes both from the same value. */
	__u64 addr = *(volatile __u64 *)be;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	res->ip = (__u32)addr;
	res->port = (__u16)(addr >> 32);
#else
	res->ip = (__u32)(addr >> 32);
	res->port = (__u16)(addr >> 16);
#endif
	if (res->ip == 0)
		return CANOPY_REFUSE;
	return CANOPY_REWRITE;
}

static __always_inline void canopy_count(int verdict, __u32 lookups)
{
	__u32 key = 0;
	struct canopy_stats *st = bpf_map_lookup_elem(&canopy_stats, &key);

	if (!st)
		return;
	st->connects++;
	st->lookups += lookups + 1;
	if (verdict == CANOPY_REWRITE)
		st->rewritten++;
	else
		st->refused++;
}

SEC("cgroup/connect4")
int canopy_connect4(struct bpf_sock_addr *ctx)
{
	struct canopy_result res = {};
	int verdict;

	verdict = canopy_select(ctx->user_ip4, (__u16)ctx->user_port, 0, 0, 1, &res);
	if (verdict == CANOPY_PASS)
		return 1;
	canopy_count(verdict, res.lookups);
	if (verdict == CANOPY_REFUSE)
		return 0; /* connect() fails with EPERM */
	struct canopy_peer *peer = bpf_sk_storage_get(&canopy_peers, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (peer) {
		peer->vip[0] = ctx->user_ip4;
		peer->port = (__u16)ctx->user_port;
		peer->backend[0] = res.ip;
		peer->bport = res.port;
	}
	ctx->user_ip4 = res.ip;
	ctx->user_port = res.port;
	return 1;
}

/* The peer of a socket connected through a VIP is the VIP (getpeername, and recvmsg of connected UDP). */
static __always_inline void canopy_peer4(struct bpf_sock_addr *ctx)
{
	struct canopy_peer *peer = bpf_sk_storage_get(&canopy_peers, ctx->sk, 0, 0);

	if (peer && peer->backend[0] == ctx->user_ip4 && peer->bport == (__u16)ctx->user_port) {
		ctx->user_ip4 = peer->vip[0];
		ctx->user_port = peer->port;
	}
}

static __always_inline void canopy_peer6(struct bpf_sock_addr *ctx)
{
	struct canopy_peer *peer = bpf_sk_storage_get(&canopy_peers, ctx->sk, 0, 0);

	if (peer && peer->backend[0] == ctx->user_ip6[0] && peer->backend[1] == ctx->user_ip6[1] &&
	    peer->backend[2] == ctx->user_ip6[2] && peer->backend[3] == ctx->user_ip6[3] &&
	    peer->bport == (__u16)ctx->user_port) {
		ctx->user_ip6[0] = peer->vip[0];
		ctx->user_ip6[1] = peer->vip[1];
		ctx->user_ip6[2] = peer->vip[2];
		ctx->user_ip6[3] = peer->vip[3];
		ctx->user_port = peer->port;
	}
}

/*
 * Unconnected UDP: a sendto() a VIP goes to a backend. The socket keeps the
 * backend it was given for that VIP (in canopy_peers), so its datagrams go to
 * one backend and recvmsg4 reports the replies as the VIP's; a sendto()
 * another VIP picks again.
 */
SEC("cgroup/sendmsg4")
int canopy_sendmsg4(struct bpf_sock_addr *ctx)
{
	struct canopy_peer *peer = bpf_sk_storage_get(&canopy_peers, ctx->sk, 0, 0);
	struct canopy_result res = {};
	int verdict;

	if (peer && peer->vip[0] == ctx->user_ip4 && peer->port == (__u16)ctx->user_port && peer->backend[0]) {
		ctx->user_ip4 = peer->backend[0];
		ctx->user_port = peer->bport;
		return 1;
	}
	verdict = canopy_select(ctx->user_ip4, (__u16)ctx->user_port, 0, 0, 1, &res);
	if (verdict == CANOPY_PASS)
		return 1;
	canopy_count(verdict, res.lookups);
	if (verdict == CANOPY_REFUSE)
		return 0; /* sendmsg() fails with EPERM */
	peer = bpf_sk_storage_get(&canopy_peers, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (peer) {
		peer->vip[0] = ctx->user_ip4;
		peer->port = (__u16)ctx->user_port;
		peer->backend[0] = res.ip;
		peer->bport = res.port;
	}
	ctx->user_ip4 = res.ip;
	ctx->user_port = res.port;
	return 1;
}

SEC("cgroup/getpeername4")
int canopy_getpeername4(struct bpf_sock_addr *ctx)
{
	canopy_peer4(ctx);
	return 1;
}

SEC("cgroup/recvmsg4")
int canopy_recvmsg4(struct bpf_sock_addr *ctx)
{
	canopy_peer4(ctx);
	return 1;
}

SEC("cgroup/getpeername6")
int canopy_getpeername6(struct bpf_sock_addr *ctx)
{
	canopy_peer6(ctx);
	return 1;
}

SEC("cgroup/recvmsg6")
int canopy_recvmsg6(struct bpf_sock_addr *ctx)
{
	canopy_peer6(ctx);
	return 1;
}

/*
 * IPv6 VIPs: the same walk from canopy_services6, to an IPv6 backend.
 * `sticky` (sendmsg6): a socket that was given a backend for this VIP keeps it.
 */
static __always_inline int canopy_v6(struct bpf_sock_addr *ctx, const int sticky)
{
	struct canopy_svc_key6 skey = {};
	struct canopy_result res = {};
	struct canopy_backend *be;
	struct canopy_svc *svcp;
	__u32 slot;
	int verdict;

	skey.vip[0] = ctx->user_ip6[0];
	skey.vip[1] = ctx->user_ip6[1];
	skey.vip[2] = ctx->user_ip6[2];
	skey.vip[3] = ctx->user_ip6[3];
	skey.port = (__u16)ctx->user_port;
	if (sticky) {
		struct canopy_peer *had = bpf_sk_storage_get(&canopy_peers, ctx->sk, 0, 0);

		if (had && had->vip[0] == skey.vip[0] && had->vip[1] == skey.vip[1] && had->vip[2] == skey.vip[2] &&
		    had->vip[3] == skey.vip[3] && had->port == skey.port && had->bport) {
			ctx->user_ip6[0] = had->backend[0];
			ctx->user_ip6[1] = had->backend[1];
			ctx->user_ip6[2] = had->backend[2];
			ctx->user_ip6[3] = had->backend[3];
			ctx->user_port = had->bport;
			return 1;
		}
	}
	res.lookups = 1;
	svcp = bpf_map_lookup_elem(&canopy_services6, &skey);
	if (!svcp)
		return 1;
	verdict = canopy_pick(svcp, 0, 0, 1, &res);
	if (verdict == CANOPY_REWRITE) {
		slot = res.slot;
		res.lookups++;
		be = bpf_map_lookup_elem(&canopy_endpoints, &slot);
		if (!be || (be->ip6[0] | be->ip6[1] | be->ip6[2] | be->ip6[3]) == 0)
			verdict = CANOPY_REFUSE;
	}
	canopy_count(verdict, res.lookups);
	if (verdict != CANOPY_REWRITE)
		return 0; /* connect() fails with EPERM */
	struct canopy_peer *peer = bpf_sk_storage_get(&canopy_peers, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (peer) {
		__builtin_memcpy(peer->vip, skey.vip, sizeof(peer->vip));
		peer->port = skey.port;
		__builtin_memcpy(peer->backend, be->ip6, sizeof(peer->backend));
		peer->bport = be->port;
	}
	ctx->user_ip6[0] = be->ip6[0];
	ctx->user_ip6[1] = be->ip6[1];
	ctx->user_ip6[2] = be->ip6[2];
	ctx->user_ip6[3] = be->ip6[3];
	ctx->user_port = be->port;
	return 1;
}

SEC("cgroup/connect6")
int canopy_connect6(struct bpf_sock_addr *ctx)
{
	return canopy_v6(ctx, 0);
}

SEC("cgroup/sendmsg6")
int canopy_sendmsg6(struct bpf_sock_addr *ctx)
{
	return canopy_v6(ctx, 1);
}

/* BPF_PROG_TEST_RUN harness: the same selection, with the cgroup and the random number given. */
SEC("syscall")
int canopy_select_test(struct canopy_test_ctx *ctx)
{
	struct canopy_result res = {};

	ctx->verdict = canopy_select(ctx->vip, ctx->port, ctx->cgroup, ctx->rand, 0, &res);
	ctx->ip = res.ip;
	ctx->bport = res.port;
	ctx->matched = res.matched;
	ctx->lookups = res.lookups;
	return 0;
}
