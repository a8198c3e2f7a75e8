/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Canopy's kernel ABI: every BPF map's key and value, in one place.
 *
 * server/src/agent/abi.ts mirrors this file field for field; the test
 * server/test/bpf-abi.test.ts compiles this header and checks that sizes and
 * offsets agree. Change both together.
 *
 * The compiled locality tree of one service lives in three maps:
 *
 *   canopy_services  (vip, port)               -> tree id, mode, levels, the root's bucket,
 *                                                 the node's own deepest bucket
 *                    (canopy_services6: the same for IPv6 VIPs)
 *   canopy_nodes     (tree, level, path hash)   -> the node's bucket
 *   canopy_endpoints slot                       -> backend ip:port (and a Fenwick partial sum)
 *
 * Every node (the root included) has a bucket of its own: the endpoints of
 * its whole subtree in slots of canopy_endpoints that no other node uses, in
 * up to two segments. A pick reads one node and one slot (a weighted pick: a
 * Fenwick-tree descent, log2(count) + 1 slots). So a one-endpoint change
 * writes a slot or two and the count of each bucket on that endpoint's path,
 * never another node's slots: a leaf that grows gets a second segment, a new
 * locality fresh buckets, published by one node (or service) write each. A
 * version whose shape changed (mode, scopes, family) is written under a fresh
 * tree id and fresh slots, then published by one write to canopy_services;
 * the old entries are freed one grace period later.
 *
 * Locality values (strings) are compared as 64-bit FNV-1a hashes; 0 means
 * "no value". A workload's locality is indexed by scope slot: region, zone
 * and subzone are fixed slots, other scopes (network, node, cluster,
 * label:<key>) get slots assigned by the agent and recorded in canopy_scopes.
 */
#ifndef CANOPY_ABI_H
#define CANOPY_ABI_H

#include <linux/types.h>

#define CANOPY_MAX_DEPTH 8   /* tree levels: the server allows 1..8 scopes */
#define CANOPY_MAX_SCOPES 16 /* scope slots per workload locality */

#define CANOPY_SCOPE_REGION 0
#define CANOPY_SCOPE_ZONE 1
#define CANOPY_SCOPE_SUBZONE 2
#define CANOPY_SCOPE_FIRST_DYNAMIC 3

/* Default map sizes; the agent may raise them before the first load. */
#define CANOPY_MAX_SERVICES 4096
#define CANOPY_MAX_NODES 262144
#define CANOPY_MAX_ENDPOINTS 1048576
#define CANOPY_MAX_WORKLOADS 65536

enum canopy_mode {
	CANOPY_MODE_RANDOM = 0,   /* ignore locality: any backend of the service */
	CANOPY_MODE_FAILOVER = 1, /* deepest matched node's backends */
	CANOPY_MODE_STRICT = 2,   /* the full path must match, else refuse */
	/* Failover whose first level is the network (Istio's cross-network failover):
	 * a caller whose network has no backends walks the service's merged tree
	 * (the same backends grouped by the remaining levels, every network together),
	 * which is what priority 0 of its CLA holds. */
	CANOPY_MODE_NETWORK_FIRST = 3,
};

/* canopy_svc.flags */
#define CANOPY_SVC_WEIGHTED 1 /* endpoints differ in weight (or did since the last full layout): pick by canopy_backend.wsum */

/* Fenwick-descent steps of a weighted pick: enough for CANOPY_MAX_ENDPOINTS (2^20). */
#define CANOPY_WEIGHT_STEPS 21

/* canopy_node_key.level bit of the merged tree's nodes (CANOPY_MODE_NETWORK_FIRST). */
#define CANOPY_ALT_LEVEL 0x80000000u

/* A node's path hash: h(0) = 0, h(level i) = (h(parent) ^ value) * CANOPY_PATH_PRIME
 * (mod 2^64), value the FNV-1a 64 of the node's value. The merged tree's
 * paths start below the network level. */
#define CANOPY_PATH_PRIME 0x100000001b3ull

/* canopy_services: BPF_MAP_TYPE_HASH, no prealloc (a replaced value is freed after RCU). */
struct canopy_svc_key {
	__u32 vip;  /* IPv4, network byte order (as in bpf_sock_addr.user_ip4) */
	__u16 port; /* network byte order */
	__u16 pad;  /* zero */
};

/*
 * A node's bucket: entry i (0 <= i < count) is at slot base + i when i < split,
 * else at base2 + (i - split). Unweighted services keep entries 0..count-1
 * live (a removed endpoint's slot takes the last entry); weighted ones keep
 * removed entries as zero-weight holes and pick by a Fenwick-tree descent
 * over the entries' wsum (entry i, 1-based, holds the weights of entries
 * (i - lowbit(i), i]).
 */
struct canopy_bucket {
	__u32 base;  /* first slot of the first segment */
	__u32 split; /* entries in the first segment */
	__u32 base2; /* first slot of the second segment (a bucket that outgrew its first) */
	__u32 count; /* entries */
	__u32 total; /* the weights of all entries */
};

struct canopy_svc {
	__u32 tree;     /* tree id: the key space of this version's nodes */
	__u8 mode;      /* enum canopy_mode */
	__u8 depth;     /* tree levels, <= CANOPY_MAX_DEPTH */
	__u16 flags;    /* CANOPY_SVC_* */
	__u8 level_scope[CANOPY_MAX_DEPTH]; /* scope slot of level i */
	struct canopy_bucket root;          /* every endpoint of the service */
	/* The node's own locality projected (the agent rewrites it with every change
	 * along the node's path, and when the node's locality changes): the level of
	 * the deepest node on its path with backends, 0 when none (then a connect
	 * walks), and that node's bucket. A caller with the node's locality takes
	 * it without a canopy_nodes lookup. */
	__u32 here_level;
	struct canopy_bucket here;
};

/* canopy_services6: BPF_MAP_TYPE_HASH, no prealloc: IPv6 VIPs (cgroup/connect6), value struct canopy_svc. */
struct canopy_svc_key6 {
	__u32 vip[4]; /* IPv6, network byte order (as in bpf_sock_addr.user_ip6) */
	__u16 port;   /* network byte order */
	__u16 pad;    /* zero */
};

/* canopy_nodes: BPF_MAP_TYPE_HASH, no prealloc. The root has no entry.
 * Keyed by the whole path, so a connect looks up its deepest level first and
 * stops at the first hit: one lookup when the caller's own leaf has backends
 * (a walk from the root took one per level). */
struct canopy_node_key {
	__u32 tree;
	__u32 level;  /* 1..depth; | CANOPY_ALT_LEVEL in the merged tree */
	__u64 value;  /* path hash of the node (CANOPY_PATH_PRIME) */
};

struct canopy_node {
	struct canopy_bucket b; /* the endpoints of this node's subtree */
	__u32 id;               /* this node's index in the tree message (for debugging) */
};

/* canopy_endpoints: BPF_MAP_TYPE_ARRAY, key __u32 slot. */
struct canopy_backend {
	__u32 ip;   /* network byte order; an IPv6 service's bucket entry: 1 + the slot that holds its address */
	__u16 port; /* network byte order */
	__u16 pad;
	__u32 wsum; /* Fenwick partial sum of the bucket entry (struct canopy_bucket) */
	__u32 ip6[4]; /* an IPv6 backend's address slot, network byte order (ip is 0); written once, freed a grace period after its last use */
};

/* canopy_revnat: BPF_MAP_TYPE_ARRAY of CANOPY_REVNAT_SLOTS, key __u32 (cookie & (CANOPY_REVNAT_SLOTS - 1)).
 * A socket whose connect() (or first sendto()) was sent to a backend leaves
 * the VIP at the slot of its socket cookie, so getpeername() and recvmsg()
 * report the VIP the application asked for, not the backend, and a sendto()
 * the same VIP again keeps its backend. Direct-mapped: no allocation and no
 * lock on the connect path (an inlined array access and a few stores, where
 * socket storage cost an allocation per socket). A slot is taken over by the
 * socket that connects CANOPY_REVNAT_SLOTS cookies later; the older socket's
 * getpeername() then reports the backend (as Cilium's LRU reverse map does
 * when it evicts). The cookie is written last and checked before and after a
 * read, so a read never mixes two sockets' entries. */
#define CANOPY_REVNAT_SLOTS 262144 /* a power of two */
struct canopy_revnat {
	__u64 cookie;     /* the socket's cookie (bpf_get_socket_cookie); 0: free */
	__u32 vip[4];     /* IPv4 in vip[0], or IPv6; network byte order */
	__u32 backend[4]; /* the same for the backend */
	__u16 port;       /* the VIP's port, network byte order */
	__u16 bport;      /* the backend's port, network byte order */
	__u32 pad;
};

/* canopy_workloads: BPF_MAP_TYPE_HASH, key __u64 cgroup id; id 0 holds the node's own locality.
 * canopy_nodeloc: BPF_MAP_TYPE_ARRAY with one entry, key 0: the node's own locality again, where
 * a connect from a cgroup without an entry finds it (an inlined array read, not a hash lookup). */
struct canopy_locality {
	__u64 value[CANOPY_MAX_SCOPES]; /* FNV-1a 64 per scope slot, 0 = unset */
};

/* canopy_config: BPF_MAP_TYPE_ARRAY with one entry, key 0. */
struct canopy_config {
	/* Bit l set: some workload entry is a cgroup at level l of the hierarchy
	 * (the root is level 0). A connect from a cgroup without an entry of its
	 * own looks up its ancestors at these levels, deepest first, so a pod's
	 * locality applies to its containers. 0 only when no cgroup has an entry
	 * (one deeper than level 31 sets bit 31): a connect then takes the
	 * node's locality (canopy_nodeloc) without reading its cgroup id or
	 * looking it up. */
	__u32 workload_levels;
	__u32 pad;
};

/* canopy_scopes: BPF_MAP_TYPE_ARRAY, key __u32 slot -> __u64 FNV-1a of the scope name.
 * Only the agent reads it (to keep slot numbers across restarts). */

/* canopy_stats: BPF_MAP_TYPE_PERCPU_ARRAY with one entry, key 0 (one lookup per connect). */
struct canopy_stats {
	__u64 connects;  /* connects to a service VIP */
	__u64 rewritten; /* sent to a backend */
	__u64 refused;   /* strict mode without a full match, or an empty service */
	__u64 lookups;   /* map lookups made for VIP connects, the stats lookup included */
};

/* Result of one selection, shared by the connect4 program and the test-run harness. */
enum canopy_verdict {
	CANOPY_PASS = 0,    /* not a service VIP: leave the connect alone */
	CANOPY_REWRITE = 1, /* send it to `backend` */
	CANOPY_REFUSE = 2,  /* fail the connect with EPERM */
};

/* Context of the BPF_PROG_TEST_RUN harness (SEC("syscall") canopy_select_test). */
struct canopy_test_ctx {
	/* in */
	__u32 vip;  /* network byte order */
	__u16 port; /* network byte order */
	__u16 pad;
	__u64 cgroup; /* cgroup id to take the locality from */
	__u32 rand;   /* the random number the selection uses */
	/* out */
	__u32 verdict; /* enum canopy_verdict */
	__u32 ip;      /* chosen backend, network byte order */
	__u16 bport;
	__u16 pad2;
	__u32 matched; /* tree levels matched */
	__u32 lookups; /* map lookups made */
	__u32 pad3;
};

/*
 * Load-aware balancing (docs/load-aware.md). A service whose canopy_svc.flags
 * has CANOPY_SVC_SPILL is load aware: after the walk finds the caller's
 * deepest node, canopy_spill (keyed by the service and that node's level and
 * path hash) may send the connect to other leaves, each with the weight the
 * server's load plan gives it (priority 0 of that node's CLA): one random
 * draw against the cumulative weights, then the chosen leaf is looked up in
 * the service's current tree (by level and path hash, so the table does not
 * depend on a tree version's layout) and an endpoint is picked there as
 * today. No entry, or a chosen leaf with no backends: the plain pick. Every
 * connect of such a service is counted in canopy_spill_cnt by the caller's node and the node it was
 * picked from (the chosen leaf, else the deepest matched node): the agent
 * reports these counts over LRS as the load its node offers.
 */
#define CANOPY_SVC_SPILL 2      /* canopy_svc.flags: load aware (canopy_spill, canopy_spill_cnt) */
#define CANOPY_SPILL_TARGETS 16 /* leaves per client node's spill, at most */
#define CANOPY_MAX_SPILLS 65536 /* canopy_spill and canopy_spill_cnt entries */

/* Key of canopy_spill: a service's client node (and, in canopy_spill_cnt_key, a target node). */
struct canopy_spill_key {
	__u32 vip[4]; /* the service's VIP, network byte order: IPv4 in vip[0] (the rest 0), or IPv6 */
	__u16 port;   /* network byte order */
	__u16 family; /* 4 or 6 */
	__u32 level;  /* the node's level: 0 the root, 1..depth */
	__u64 path;   /* its path hash (CANOPY_PATH_PRIME); 0 for the root */
};

struct canopy_spill_target {
	__u32 level; /* a leaf: level = the tree's depth */
	__u32 cum;   /* weights of targets 0..this one */
	__u64 path;  /* the leaf's path hash */
};

/* canopy_spill: BPF_MAP_TYPE_HASH, no prealloc, canopy_spill_key -> canopy_spill. */
struct canopy_spill {
	__u32 count; /* targets in use, <= CANOPY_SPILL_TARGETS */
	__u32 total; /* cum of the last target in use */
	struct canopy_spill_target target[CANOPY_SPILL_TARGETS];
};

/* canopy_spill_cnt: BPF_MAP_TYPE_PERCPU_HASH, no prealloc, canopy_spill_cnt_key -> __u64 connects (per CPU).
 * The agent reports each caller node's counts as load offered from that node. */
struct canopy_spill_cnt_key {
	struct canopy_spill_key target; /* the service, and the node picked from: the chosen leaf, else the caller's */
	__u32 client_level;             /* the caller's deepest node with backends: its level (0: the root) */
	__u32 pad;
	__u64 client_path;              /* and its path hash */
};

#endif /* CANOPY_ABI_H */
