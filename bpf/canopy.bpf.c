// SPDX-License-Identifier: (Apache-2.0 OR GPL-2.0)
/*
 * Canopy's kernel datapath: on connect() to a service VIP, walk the service's
 * compiled locality tree with the caller's locality and send the connection
 * to a backend of the deepest matched node.
 *
 * Map lookups per VIP connect: 1 service + the caller's locality (the
 * workload config, an array read; then the cgroup's own entry, else the
 * ancestors' at the levels that have entries, only when some cgroup has one;
 * then the node default, an array read) + the tree levels looked up deepest first (none
 * for a caller with the node's locality: the service value holds its bucket; 1 when
 * the caller's own leaf has backends, depth at most; a network-first service
 * whose caller's network has none adds depth - 1 in the merged tree)
 * + 1 entry of the chosen node's bucket (weighted: log2(count) + 1; IPv6: + 1
 * for the address) + 1 stats (+ the canopy_revnat slot, an array read).
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
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct canopy_locality);
} canopy_nodeloc SEC(".maps");

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
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CANOPY_REVNAT_SLOTS);
	__type(key, __u32);
	__type(value, struct canopy_revnat);
} canopy_revnat SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, CANOPY_MAX_SPILLS);
	__type(key, struct canopy_spill_key);
	__type(value, struct canopy_spill);
} canopy_spill SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, CANOPY_MAX_SPILLS);
	__type(key, struct canopy_spill_cnt_key);
	__type(value, __u64);
} canopy_spill_cnt SEC(".maps");

struct canopy_result {
	__u32 ip;
	__u16 port;
	__u32 matched;
	__u32 lookups;
	__u32 slot; /* the chosen endpoint slot */
	__u32 here; /* the caller's locality is the node's (canopy_nodeloc) */
	/* The service's VIP (canopy_spill_key): set by the caller before the pick. */
	__u32 vip[4];
	__u16 vport;
	__u16 family;
};

/* In and out of canopy_spill_pick. */
struct canopy_spill_io {
	__u32 vip[4];
	__u16 port;
	__u16 family;
	__u32 tree;
	__u32 matched; /* the walk's deepest node with backends: its level (0: none, the root) */
	__u32 rnd;
	__u32 live; /* count the connect in canopy_spill_cnt */
	/* out */
	__u32 picked; /* 1: b is the chosen leaf's bucket */
	struct canopy_bucket b;
	__u32 rnd_next; /* what is left of rnd after the draw, for the endpoint pick */
	__u32 lookups;
};

/*
 * Load-aware services (CANOPY_SVC_SPILL): the caller's node's spill, one
 * random draw against its cumulative weights (a bounded scan of at most
 * CANOPY_SPILL_TARGETS), and the chosen leaf's range in the service's
 * current tree; then the connect is counted by the node it is picked from.
 * A global function, so the verifier checks it once.
 */
__attribute__((noinline)) int canopy_spill_pick(const struct canopy_svc *svc, const struct canopy_locality *loc,
						 struct canopy_spill_io *io)
{
	struct canopy_spill_key key = {};
	struct canopy_spill_cnt_key ckey = {};
	struct canopy_node_key nkey = {};
	struct canopy_spill *sp;
	struct canopy_node *node;
	__u64 h = 0, *cnt, one = 1;
	__u32 i, j, total, n, r;

	if (!svc || !loc || !io)
		return 0;
	for (i = 0; i < CANOPY_MAX_DEPTH; i++) {
		if (i >= io->matched)
			break;
		h = (h ^ loc->value[svc->level_scope[i] & (CANOPY_MAX_SCOPES - 1)]) * CANOPY_PATH_PRIME;
	}
	key.vip[0] = io->vip[0];
	key.vip[1] = io->vip[1];
	key.vip[2] = io->vip[2];
	key.vip[3] = io->vip[3];
	key.port = io->port;
	key.family = io->family;
	key.level = io->matched;
	key.path = h;
	io->lookups++;
	sp = bpf_map_lookup_elem(&canopy_spill, &key);
	if (sp) {
		total = sp->total;
		n = sp->count;
		if (total > 0 && n > 0) {
			r = io->rnd % total;
			for (j = 0; j < CANOPY_SPILL_TARGETS - 1; j++) {
				if (j + 1 >= n || sp->target[j].cum > r)
					break;
			}
			j &= CANOPY_SPILL_TARGETS - 1;
			nkey.tree = io->tree;
			nkey.level = sp->target[j].level;
			nkey.value = sp->target[j].path;
			io->lookups++;
			node = bpf_map_lookup_elem(&canopy_nodes, &nkey);
			if (node && node->b.count > 0) {
				io->picked = 1;
				__builtin_memcpy(&io->b, &node->b, sizeof(io->b));
				io->rnd_next = io->rnd / total;
				key.level = nkey.level;
				key.path = nkey.value;
			}
		}
	}
	if (!io->live)
		return 0;
	__builtin_memcpy(&ckey.target, &key, sizeof(key));
	ckey.client_level = io->matched;
	ckey.client_path = h;
	io->lookups++;
	cnt = bpf_map_lookup_elem(&canopy_spill_cnt, &ckey);
	if (cnt)
		*cnt += 1;
	else
		bpf_map_update_elem(&canopy_spill_cnt, &ckey, &one, BPF_NOEXIST);
	return 0;
}

/* The slot of entry i of a bucket (two segments: struct canopy_bucket). */
static __always_inline __u32 canopy_entry(const struct canopy_bucket *b, __u32 i)
{
	return i < b->split ? b->base + i : b->base2 + (i - b->split);
}

/*
 * A weighted pick in a bucket: the entry where r = rnd % total falls, by a
 * Fenwick-tree descent (log2(count) + 1 lookups, no search bounds to read
 * first). A global function, so the verifier checks it once rather than once
 * per path through the tree walk. Returns lookups << 32 | slot, or 0 when the
 * endpoint map does not hold what the agent wrote.
 */
__attribute__((noinline)) __u64 canopy_weighted(const struct canopy_bucket *bp, __u32 rnd)
{
	struct canopy_bucket b;
	struct canopy_backend *be;
	__u32 pos, next, r, key, opaque;
	__u64 lookups = 0;
	int k;

	if (!bp)
		return 0;
	__builtin_memcpy(&b, bp, sizeof(b));
	if (b.count == 0 || b.total == 0)
		return 0;
	r = rnd % b.total;
	/* pos starts at 0, but as a value the verifier does not know: a known
	 * position differs on every path, and it would walk all 2^steps of them
	 * rather than one per step. */
	opaque = b.count;
	asm volatile("" : "+r"(opaque));
	pos = b.count - opaque;
	for (k = CANOPY_WEIGHT_STEPS - 1; k >= 0; k--) {
		next = pos + (1u << k);
		if (next > b.count)
			continue;
		key = canopy_entry(&b, next - 1);
		lookups++;
		be = bpf_map_lookup_elem(&canopy_endpoints, &key);
		if (!be)
			return 0;
		if (be->wsum <= r) {
			pos = next;
			r -= be->wsum;
		}
	}
	/* Sums read while the agent updates them may not add up: stay in range. */
	if (pos >= b.count)
		pos = b.count - 1;
	return lookups << 32 | canopy_entry(&b, pos);
}

/* What canopy_walk found: the deepest node with backends on the caller's path. */
struct canopy_walk {
	struct canopy_bucket b;
	__u32 matched; /* its level, 0: none */
	__u32 lookups;
};

/*
 * The deepest node on the caller's path that has backends: the caller's path
 * hash at each level it has a value for, then lookups deepest first, so a
 * caller whose own leaf has backends costs one lookup.
 */
static __always_inline int canopy_walk_body(const struct canopy_svc *svc, const struct canopy_locality *loc,
					    struct canopy_walk *out)
{
	struct canopy_node_key nkey = {};
	__u64 path[CANOPY_MAX_DEPTH];
	__u64 h = 0, value;
	__u32 depth;
	int i, n = 0;

	if (!svc || !loc || !out)
		return 0;
	depth = svc->depth;
	nkey.tree = svc->tree;
	for (i = 0; i < CANOPY_MAX_DEPTH; i++) {
		if (i >= depth)
			break;
		value = loc->value[svc->level_scope[i] & (CANOPY_MAX_SCOPES - 1)];
		if (value == 0)
			break;
		h = (h ^ value) * CANOPY_PATH_PRIME;
		path[i] = h;
		n = i + 1;
	}
	for (i = CANOPY_MAX_DEPTH - 1; i >= 0; i--) {
		struct canopy_node *node;

		if (i >= n)
			continue;
		nkey.level = i + 1;
		nkey.value = path[i];
		out->lookups++;
		node = bpf_map_lookup_elem(&canopy_nodes, &nkey);
		if (node && node->b.count > 0) {
			__builtin_memcpy(&out->b, &node->b, sizeof(out->b));
			out->matched = i + 1;
			return 0;
		}
	}
	/* No backend in the caller's network: rank every network's backends by
	 * the remaining levels, in the merged tree. */
	if (svc->mode != CANOPY_MODE_NETWORK_FIRST || n < 2)
		return 0;
	h = 0;
	for (i = 1; i < CANOPY_MAX_DEPTH; i++) {
		if (i >= n)
			break;
		h = (h ^ loc->value[svc->level_scope[i] & (CANOPY_MAX_SCOPES - 1)]) * CANOPY_PATH_PRIME;
		path[i] = h;
	}
	for (i = CANOPY_MAX_DEPTH - 1; i >= 1; i--) {
		struct canopy_node *node;

		if (i >= n)
			continue;
		nkey.level = CANOPY_ALT_LEVEL | (i + 1);
		nkey.value = path[i];
		out->lookups++;
		node = bpf_map_lookup_elem(&canopy_nodes, &nkey);
		if (node && node->b.count > 0) {
			__builtin_memcpy(&out->b, &node->b, sizeof(out->b));
			out->matched = i + 1;
			return 0;
		}
	}
	return 0;
}

/* The same as a global function: the verifier checks it once rather than once
 * per program that calls it (the IPv6 hooks, the test harness); connect4 and
 * sendmsg4 inline it (a call costs about 15 ns there). */
__attribute__((noinline)) int canopy_walk(const struct canopy_svc *svc, const struct canopy_locality *loc, struct canopy_walk *out)
{
	return canopy_walk_body(svc, loc, out);
}

/*
 * The locality of the nearest ancestor cgroup with a workload entry, looking
 * only at the levels where the agent has put entries (canopy_config).
 */
static __always_inline struct canopy_locality *canopy_ancestor_locality(__u64 own, __u32 levels, struct canopy_result *res)
{
	struct canopy_locality *loc;
	__u64 id;
	int l;

	for (l = 31; l >= 0; l--) {
		if (!(levels & (1u << l)))
			continue;
		id = bpf_get_current_ancestor_cgroup_id(l);
		if (id == 0 || id == own)
			continue; /* deeper than the caller, or the caller itself (already looked up) */
		res->lookups++;
		loc = bpf_map_lookup_elem(&canopy_workloads, &id);
		if (loc)
			return loc;
	}
	return 0;
}

/*
 * The caller's locality on a live connect: its cgroup's workload entry, else
 * its nearest ancestor's, else the node's. canopy_config is read first (an
 * inlined array read): with no workload entries at all (workload_levels 0,
 * an agent without --workload, where every pod has the node's locality) the
 * cgroup id is not read and the workload map not looked up.
 */
static __always_inline struct canopy_locality *canopy_caller_locality(struct canopy_result *res)
{
	struct canopy_locality *loc;
	struct canopy_config *cfg;
	__u32 zero = 0, levels;
	__u64 cgroup;

	res->lookups++;
	cfg = bpf_map_lookup_elem(&canopy_config, &zero);
	levels = cfg ? cfg->workload_levels : 0;
	if (levels) {
		cgroup = bpf_get_current_cgroup_id();
		res->lookups++;
		loc = bpf_map_lookup_elem(&canopy_workloads, &cgroup);
		if (!loc)
			loc = canopy_ancestor_locality(cgroup, levels, res);
		if (loc)
			return loc;
	}
	res->lookups++;
	res->here = 1;
	return bpf_map_lookup_elem(&canopy_nodeloc, &zero);
}

/*
 * The selection, shared by the connect4 program and the test-run harness.
 * Returns an enum canopy_verdict; on CANOPY_REWRITE, res holds the backend.
 *
 * `live` is a compile-time constant: the IPv6 hooks pass 1, connect4 and
 * sendmsg4 2 (the tree walk inlined, and `rnd` given: their socket cookie
 * mixed, canopy_mix), and the cgroup id and the random number are read only
 * once the destination is known to be a service VIP, so a connect to anything
 * else costs one map lookup and no helper call. The test harness passes 0 and
 * supplies both.
 */
static __always_inline int canopy_pick(const struct canopy_svc *svcp, __u64 cgroup, __u32 rnd, const int live,
				       struct canopy_result *res)
{
	struct canopy_svc svc;
	struct canopy_locality *loc = 0;
	struct canopy_walk w = {};
	__u32 zero = 0;

	/* One copy: later reads see this version even if the entry is replaced meanwhile.
	 * The node's bucket (here) is read from the entry only when it is used: a
	 * replaced entry is freed after RCU, so it still holds this version. */
	__builtin_memcpy(&svc, svcp, __builtin_offsetof(struct canopy_svc, here_level));

	if (svc.mode != CANOPY_MODE_RANDOM && svc.depth > 0) {
		if (live) {
			loc = canopy_caller_locality(res);
		} else {
			res->lookups++;
			loc = bpf_map_lookup_elem(&canopy_workloads, &cgroup);
			if (!loc && cgroup != 0) {
				res->lookups++;
				loc = bpf_map_lookup_elem(&canopy_nodeloc, &zero);
			}
		}
	}

	if (loc) {
		if (live && res->here && svcp->here_level) {
			/* The node's own locality: its deepest bucket is in the service value. */
			__builtin_memcpy(&w.b, &svcp->here, sizeof(w.b));
			w.matched = svcp->here_level;
		} else if (live == 2) {
			canopy_walk_body(&svc, loc, &w);
		} else {
			canopy_walk(&svc, loc, &w);
		}
		res->lookups += w.lookups;
		res->matched = w.matched;
		if (svc.flags & CANOPY_SVC_SPILL) {
			struct canopy_spill_io io = {};

			io.vip[0] = res->vip[0];
			io.vip[1] = res->vip[1];
			io.vip[2] = res->vip[2];
			io.vip[3] = res->vip[3];
			io.port = res->vport;
			io.family = res->family;
			io.tree = svc.tree;
			io.matched = w.matched;
			io.rnd = live ? bpf_get_prandom_u32() : rnd;
			io.live = live ? 1 : 0;
			canopy_spill_pick(&svc, loc, &io);
			res->lookups += io.lookups;
			if (io.picked) {
				__builtin_memcpy(&w.b, &io.b, sizeof(w.b));
				w.matched = w.matched ? w.matched : 1; /* keep the spill pick from the root fallback below */
				if (!live)
					rnd = io.rnd_next; /* a live pick has a number of its own */
			}
		}
	}
	if (!w.matched)
		__builtin_memcpy(&w.b, &svc.root, sizeof(w.b));

	if (svc.mode == CANOPY_MODE_STRICT && res->matched < svc.depth)
		return CANOPY_REFUSE;
	if (w.b.count == 0)
		return CANOPY_REFUSE;

	if (live == 1)
		rnd = bpf_get_prandom_u32();
	if (svc.flags & CANOPY_SVC_WEIGHTED) {
		__u64 picked = canopy_weighted(&w.b, rnd);

		if (!picked)
			return CANOPY_REFUSE;
		res->slot = (__u32)picked;
		res->lookups += picked >> 32;
	} else {
		res->slot = canopy_entry(&w.b, rnd % w.b.count);
	}
	return CANOPY_REWRITE;
}

/* IPv4: a pick in the service's tree, and the chosen backend's address. */
static __always_inline int canopy_select_in(const struct canopy_svc *svcp, __u64 cgroup, __u32 rnd, const int live,
					    struct canopy_result *res)
{
	__u32 slot;
	int verdict;

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

/* IPv4: the service of vip:port, a pick in its tree, and the chosen backend's address. */
static __always_inline int canopy_select(__u32 vip, __u16 port, __u64 cgroup, __u32 rnd, const int live,
					 struct canopy_result *res)
{
	struct canopy_svc_key skey = { .vip = vip, .port = port, .pad = 0 };
	struct canopy_svc *svcp;

	res->lookups = 1;
	res->matched = 0;
	res->vip[0] = vip;
	res->vport = port;
	res->family = 4;
	svcp = bpf_map_lookup_elem(&canopy_services, &skey);
	if (!svcp)
		return CANOPY_PASS;
	return canopy_select_in(svcp, cgroup, rnd, live, res);
}

/* The reverse-translation slot (canopy_revnat) of a socket's cookie. */
static __always_inline struct canopy_revnat *canopy_revnat_slot(__u64 cookie)
{
	__u32 key = (__u32)cookie & (CANOPY_REVNAT_SLOTS - 1);

	return bpf_map_lookup_elem(&canopy_revnat, &key);
}

/*
 * The random number of an IPv4 pick: the socket's cookie (read anyway for
 * canopy_revnat) through a 64-bit finalizer (MurmurHash3's fmix64), where
 * bpf_get_prandom_u32 was a helper call more per connect. Cookies are unique
 * per socket and the mix spreads consecutive ones over the whole range, so a
 * pick by rnd % count stays uniform; one socket that connects again to the
 * same VIP gets the same backend.
 */
static __always_inline __u32 canopy_mix(__u64 x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (__u32)x;
}

/* Remembers that this socket's VIP is sent to the backend: the cookie is written last. */
static __always_inline void canopy_remember(__u64 cookie, const __u32 *vip, __u16 port, const __u32 *backend, __u16 bport)
{
	struct canopy_revnat *e;

	e = canopy_revnat_slot(cookie);
	if (!e)
		return;
	*(volatile __u64 *)&e->cookie = 0;
	e->vip[0] = vip[0];
	e->vip[1] = vip[1];
	e->vip[2] = vip[2];
	e->vip[3] = vip[3];
	e->backend[0] = backend[0];
	e->backend[1] = backend[1];
	e->backend[2] = backend[2];
	e->backend[3] = backend[3];
	e->port = port;
	e->bport = bport;
	*(volatile __u64 *)&e->cookie = cookie;
}

/* This socket's entry, copied; 0 when it has none (or another socket took its slot meanwhile). */
static __always_inline int canopy_recall(__u64 cookie, struct canopy_revnat *out)
{
	struct canopy_revnat *e;

	e = canopy_revnat_slot(cookie);
	if (!e || *(volatile __u64 *)&e->cookie != cookie)
		return 0;
	__builtin_memcpy(out, e, sizeof(*out));
	return out->cookie == cookie && *(volatile __u64 *)&e->cookie == cookie;
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

/* The IPv4 address an IPv4-mapped IPv6 address (::ffff:a.b.c.d) carries, or 0. */
static __always_inline __u32 canopy_mapped4(const __u32 *ip6)
{
	if (ip6[0] == 0 && ip6[1] == 0 && ip6[2] == bpf_htonl(0xffff))
		return ip6[3];
	return 0;
}

static __always_inline void canopy_remember4(__u64 cookie, __u32 vip, __u16 port, __u32 ip, __u16 bport)
{
	__u32 v[4] = { vip, 0, 0, 0 }, b[4] = { ip, 0, 0, 0 };

	canopy_remember(cookie, v, port, b, bport);
}

SEC("cgroup/connect4")
int canopy_connect4(struct bpf_sock_addr *ctx)
{
	struct canopy_svc_key skey = { .vip = ctx->user_ip4, .port = (__u16)ctx->user_port, .pad = 0 };
	struct canopy_result res = { .lookups = 1 };
	struct canopy_svc *svcp;
	__u64 cookie;
	int verdict;

	svcp = bpf_map_lookup_elem(&canopy_services, &skey);
	if (!svcp)
		return 1;
	cookie = bpf_get_socket_cookie(ctx);
	res.vip[0] = skey.vip;
	res.vport = skey.port;
	res.family = 4;
	verdict = canopy_select_in(svcp, 0, canopy_mix(cookie), 2, &res);
	canopy_count(verdict, res.lookups);
	if (verdict == CANOPY_REFUSE)
		return 0; /* connect() fails with EPERM */
	canopy_remember4(cookie, skey.vip, skey.port, res.ip, res.port);
	ctx->user_ip4 = res.ip;
	ctx->user_port = res.port;
	return 1;
}

/* The peer of a socket connected through a VIP is the VIP (getpeername, and recvmsg of connected UDP). */
static __always_inline void canopy_peer4(struct bpf_sock_addr *ctx)
{
	struct canopy_revnat e;

	if (canopy_recall(bpf_get_socket_cookie(ctx), &e) && e.backend[0] == ctx->user_ip4 && e.bport == (__u16)ctx->user_port &&
	    (e.backend[1] | e.backend[2] | e.backend[3]) == 0) {
		ctx->user_ip4 = e.vip[0];
		ctx->user_port = e.port;
	}
}

static __always_inline void canopy_peer6(struct bpf_sock_addr *ctx)
{
	struct canopy_revnat e;
	__u32 v4;

	if (!canopy_recall(bpf_get_socket_cookie(ctx), &e) || e.bport != (__u16)ctx->user_port)
		return;
	if (e.backend[0] == ctx->user_ip6[0] && e.backend[1] == ctx->user_ip6[1] && e.backend[2] == ctx->user_ip6[2] &&
	    e.backend[3] == ctx->user_ip6[3]) {
		ctx->user_ip6[0] = e.vip[0];
		ctx->user_ip6[1] = e.vip[1];
		ctx->user_ip6[2] = e.vip[2];
		ctx->user_ip6[3] = e.vip[3];
		ctx->user_port = e.port;
		return;
	}
	/* A dual-stack socket's sendto() ::ffff:VIP runs sendmsg4 (the kernel hands
	 * IPv4-mapped destinations to the IPv4 path), which leaves an IPv4 entry:
	 * its replies arrive here as ::ffff:backend. */
	v4 = canopy_mapped4((const __u32 *)ctx->user_ip6);
	if (v4 && (e.backend[1] | e.backend[2] | e.backend[3]) == 0 && e.backend[0] == v4 &&
	    (e.vip[1] | e.vip[2] | e.vip[3]) == 0) {
		ctx->user_ip6[3] = e.vip[0];
		ctx->user_port = e.port;
	}
}

/*
 * Unconnected UDP: a sendto() a VIP goes to a backend. The socket keeps the
 * backend it was given for that VIP (in canopy_revnat), so its datagrams go to
 * one backend and recvmsg4 reports the replies as the VIP's; a sendto()
 * another VIP picks again. A sendto() anything else costs one lookup.
 */
SEC("cgroup/sendmsg4")
int canopy_sendmsg4(struct bpf_sock_addr *ctx)
{
	struct canopy_svc_key skey = { .vip = ctx->user_ip4, .port = (__u16)ctx->user_port, .pad = 0 };
	struct canopy_result res = { .lookups = 1 };
	struct canopy_revnat had;
	struct canopy_svc *svcp;
	__u64 cookie;
	int verdict;

	svcp = bpf_map_lookup_elem(&canopy_services, &skey);
	if (!svcp)
		return 1;
	cookie = bpf_get_socket_cookie(ctx);
	if (canopy_recall(cookie, &had) && had.vip[0] == skey.vip && (had.vip[1] | had.vip[2] | had.vip[3]) == 0 &&
	    had.port == skey.port && had.backend[0]) {
		ctx->user_ip4 = had.backend[0];
		ctx->user_port = had.bport;
		return 1;
	}
	res.vip[0] = skey.vip;
	res.vport = skey.port;
	res.family = 4;
	verdict = canopy_select_in(svcp, 0, canopy_mix(cookie), 2, &res);
	canopy_count(verdict, res.lookups);
	if (verdict == CANOPY_REFUSE)
		return 0; /* sendmsg() fails with EPERM */
	canopy_remember4(cookie, skey.vip, skey.port, res.ip, res.port);
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
 * IPv6 VIPs: the same walk from canopy_services6, to an IPv6 backend; and an
 * IPv4 VIP reached from an IPv6 socket as ::ffff:VIP (dual-stack sockets),
 * from canopy_services, to ::ffff:backend.
 * `sticky` (sendmsg6): a socket that was given a backend for this VIP keeps it.
 */
static __always_inline int canopy_v6(struct bpf_sock_addr *ctx, const int sticky)
{
	struct canopy_svc_key6 skey = {};
	struct canopy_result res = {};
	struct canopy_backend *be;
	struct canopy_svc *svcp;
	__u32 backend[4], v4;
	__u16 bport;
	__u32 slot;
	__u64 cookie;
	int verdict;

	skey.vip[0] = ctx->user_ip6[0];
	skey.vip[1] = ctx->user_ip6[1];
	skey.vip[2] = ctx->user_ip6[2];
	skey.vip[3] = ctx->user_ip6[3];
	skey.port = (__u16)ctx->user_port;
	v4 = canopy_mapped4(skey.vip);
	if (v4) {
		struct canopy_svc_key key4 = { .vip = v4, .port = skey.port, .pad = 0 };

		svcp = bpf_map_lookup_elem(&canopy_services, &key4);
	} else {
		svcp = bpf_map_lookup_elem(&canopy_services6, &skey);
	}
	if (!svcp)
		return 1;
	cookie = bpf_get_socket_cookie(ctx);
	if (sticky) {
		struct canopy_revnat had;

		if (canopy_recall(cookie, &had) && had.vip[0] == skey.vip[0] && had.vip[1] == skey.vip[1] &&
		    had.vip[2] == skey.vip[2] && had.vip[3] == skey.vip[3] && had.port == skey.port && had.bport) {
			ctx->user_ip6[0] = had.backend[0];
			ctx->user_ip6[1] = had.backend[1];
			ctx->user_ip6[2] = had.backend[2];
			ctx->user_ip6[3] = had.backend[3];
			ctx->user_port = had.bport;
			return 1;
		}
	}
	res.lookups = 1;
	res.vport = skey.port;
	if (v4) {
		res.vip[0] = v4;
		res.family = 4;
	} else {
		res.vip[0] = skey.vip[0];
		res.vip[1] = skey.vip[1];
		res.vip[2] = skey.vip[2];
		res.vip[3] = skey.vip[3];
		res.family = 6;
	}
	if (v4) {
		verdict = canopy_select_in(svcp, 0, 0, 1, &res);
		backend[0] = 0;
		backend[1] = 0;
		backend[2] = bpf_htonl(0xffff);
		backend[3] = res.ip;
		bport = res.port;
	} else {
		verdict = canopy_pick(svcp, 0, 0, 1, &res);
		backend[0] = backend[1] = backend[2] = backend[3] = 0;
		bport = 0;
		if (verdict == CANOPY_REWRITE) {
			/* The bucket entry names the slot of the address (one 4-byte read: the
			 * agent rewrites entries in place; an address slot is written once). */
			slot = res.slot;
			res.lookups += 2;
			be = bpf_map_lookup_elem(&canopy_endpoints, &slot);
			slot = be ? *(volatile __u32 *)&be->ip : 0;
			be = slot ? bpf_map_lookup_elem(&canopy_endpoints, &(__u32){ slot - 1 }) : 0;
			if (!be || (be->ip6[0] | be->ip6[1] | be->ip6[2] | be->ip6[3]) == 0) {
				verdict = CANOPY_REFUSE;
			} else {
				backend[0] = be->ip6[0];
				backend[1] = be->ip6[1];
				backend[2] = be->ip6[2];
				backend[3] = be->ip6[3];
				bport = be->port;
			}
		}
	}
	canopy_count(verdict, res.lookups);
	if (verdict != CANOPY_REWRITE)
		return 0; /* connect() fails with EPERM */
	canopy_remember(cookie, skey.vip, skey.port, backend, bport);
	ctx->user_ip6[0] = backend[0];
	ctx->user_ip6[1] = backend[1];
	ctx->user_ip6[2] = backend[2];
	ctx->user_ip6[3] = backend[3];
	ctx->user_port = bport;
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
