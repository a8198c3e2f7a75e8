// SPDX-License-Identifier: Apache-2.0
/*
 * Prints the layout of every struct in canopy_abi.h as JSON, for
 * server/test/bpf-abi.test.ts to compare with server/src/agent/abi.ts.
 * Built with the host compiler (the BPF target lays out these fixed-width
 * structs the same way on x86-64 and arm64).
 */
#include <stddef.h>
#include <stdio.h>
#include "canopy_abi.h"

#define FIELD(s, f) printf("%s\"%s\":%zu", first++ ? "," : "", #f, offsetof(struct s, f))
#define BEGIN(s) do { int first = 0; printf("%s\"%s\":{\"size\":%zu,\"fields\":{", nstruct++ ? "," : "", #s, sizeof(struct s))
#define END() printf("}}"); } while (0)
#define CONST(c) printf(",\"%s\":%d", #c, (int)(c))

int main(void)
{
	int nstruct = 0;

	printf("{\"layout\":{");
	BEGIN(canopy_svc_key); FIELD(canopy_svc_key, vip); FIELD(canopy_svc_key, port); FIELD(canopy_svc_key, pad); END();
	BEGIN(canopy_svc_key6); FIELD(canopy_svc_key6, vip); FIELD(canopy_svc_key6, port); FIELD(canopy_svc_key6, pad); END();
	BEGIN(canopy_bucket); FIELD(canopy_bucket, base); FIELD(canopy_bucket, split); FIELD(canopy_bucket, base2);
	FIELD(canopy_bucket, count); FIELD(canopy_bucket, total); END();
	BEGIN(canopy_svc); FIELD(canopy_svc, tree); FIELD(canopy_svc, mode); FIELD(canopy_svc, depth);
	FIELD(canopy_svc, flags); FIELD(canopy_svc, level_scope); FIELD(canopy_svc, root);
	FIELD(canopy_svc, here_level); FIELD(canopy_svc, here); END();
	BEGIN(canopy_node_key); FIELD(canopy_node_key, tree); FIELD(canopy_node_key, level); FIELD(canopy_node_key, value); END();
	BEGIN(canopy_node); FIELD(canopy_node, b); FIELD(canopy_node, id); END();
	BEGIN(canopy_backend); FIELD(canopy_backend, ip); FIELD(canopy_backend, port); FIELD(canopy_backend, pad); FIELD(canopy_backend, wsum); FIELD(canopy_backend, ip6); END();
	BEGIN(canopy_revnat); FIELD(canopy_revnat, cookie); FIELD(canopy_revnat, vip); FIELD(canopy_revnat, backend);
	FIELD(canopy_revnat, port); FIELD(canopy_revnat, bport); FIELD(canopy_revnat, pad); END();
	BEGIN(canopy_config); FIELD(canopy_config, workload_levels); FIELD(canopy_config, pad); END();
	BEGIN(canopy_locality); FIELD(canopy_locality, value); END();
	BEGIN(canopy_stats); FIELD(canopy_stats, connects); FIELD(canopy_stats, rewritten); FIELD(canopy_stats, refused);
	FIELD(canopy_stats, lookups); END();
	BEGIN(canopy_test_ctx); FIELD(canopy_test_ctx, vip); FIELD(canopy_test_ctx, port); FIELD(canopy_test_ctx, pad);
	FIELD(canopy_test_ctx, cgroup); FIELD(canopy_test_ctx, rand); FIELD(canopy_test_ctx, verdict);
	FIELD(canopy_test_ctx, ip); FIELD(canopy_test_ctx, bport); FIELD(canopy_test_ctx, pad2);
	FIELD(canopy_test_ctx, matched); FIELD(canopy_test_ctx, lookups); FIELD(canopy_test_ctx, pad3); END();
	BEGIN(canopy_spill_key); FIELD(canopy_spill_key, vip); FIELD(canopy_spill_key, port); FIELD(canopy_spill_key, family);
	FIELD(canopy_spill_key, level); FIELD(canopy_spill_key, path); END();
	BEGIN(canopy_spill_target); FIELD(canopy_spill_target, level); FIELD(canopy_spill_target, cum); FIELD(canopy_spill_target, path); END();
	BEGIN(canopy_spill); FIELD(canopy_spill, count); FIELD(canopy_spill, total); FIELD(canopy_spill, target); END();
	BEGIN(canopy_spill_cnt_key); FIELD(canopy_spill_cnt_key, target); FIELD(canopy_spill_cnt_key, client_level);
	FIELD(canopy_spill_cnt_key, pad); FIELD(canopy_spill_cnt_key, client_path); END();
	printf("},\"constants\":{\"CANOPY_MAX_DEPTH\":%d", CANOPY_MAX_DEPTH);
	CONST(CANOPY_MAX_SCOPES); CONST(CANOPY_SCOPE_REGION); CONST(CANOPY_SCOPE_ZONE); CONST(CANOPY_SCOPE_SUBZONE);
	CONST(CANOPY_SCOPE_FIRST_DYNAMIC); CONST(CANOPY_MAX_SERVICES); CONST(CANOPY_MAX_NODES); CONST(CANOPY_MAX_ENDPOINTS);
	CONST(CANOPY_MAX_WORKLOADS); CONST(CANOPY_MODE_RANDOM); CONST(CANOPY_MODE_FAILOVER); CONST(CANOPY_MODE_STRICT);
	CONST(CANOPY_MODE_NETWORK_FIRST);
	CONST(CANOPY_SVC_WEIGHTED); CONST(CANOPY_WEIGHT_STEPS); CONST(CANOPY_REVNAT_SLOTS);
	printf(",\"CANOPY_ALT_LEVEL\":%u", CANOPY_ALT_LEVEL);
	CONST(CANOPY_PASS); CONST(CANOPY_REWRITE); CONST(CANOPY_REFUSE);
	CONST(CANOPY_SVC_SPILL); CONST(CANOPY_SPILL_TARGETS); CONST(CANOPY_MAX_SPILLS);
	printf("}}\n");
	return 0;
}
