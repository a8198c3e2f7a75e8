// SPDX-License-Identifier: Apache-2.0
/*
 * A small N-API binding over the system libbpf: just what the node agent
 * needs to load and pin Canopy's object, attach it to a cgroup, and read and
 * write its maps. Map keys and values cross as Buffers laid out by
 * server/src/agent/abi.ts (the mirror of bpf/canopy_abi.h); this file knows
 * nothing of their meaning.
 *
 * Errors are thrown as JS Errors whose message names the operation and the
 * errno, and whose `code` is the errno name (e.g. "ENOENT"). A key or value
 * Buffer whose size is not the map's (the kernel copies the map's whole key
 * and value, whatever the Buffer holds) is refused before any syscall touches
 * it: `code` CANOPY_BPF_BUFFER, the message naming the map and both sizes.
 */
#define NAPI_VERSION 8
#include <node_api.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHECK(call)                                                                                                   \
	do {                                                                                                          \
		if ((call) != napi_ok) {                                                                              \
			napi_throw_error(env, NULL, "canopy_bpf: N-API call failed: " #call);                         \
			return NULL;                                                                                  \
		}                                                                                                     \
	} while (0)

static const char *errno_name(int e)
{
	switch (e) {
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case E2BIG: return "E2BIG";
	case EBADF: return "EBADF";
	case EAGAIN: return "EAGAIN";
	case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES";
	case EFAULT: return "EFAULT";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case EINVAL: return "EINVAL";
	case ENOSPC: return "ENOSPC";
	case ENOTSUP: return "ENOTSUP";
	case 524: return "ENOTSUPP";
	default: return "EUNKNOWN";
	}
}

static napi_value throw_errno(napi_env env, int err, const char *fmt, ...)
{
	char msg[512];
	char full[700];
	va_list ap;
	napi_value code, message, error;

	if (err < 0)
		err = -err;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(full, sizeof(full), "%s: %s (%s)", msg, strerror(err), errno_name(err));
	napi_create_string_utf8(env, errno_name(err), NAPI_AUTO_LENGTH, &code);
	napi_create_string_utf8(env, full, NAPI_AUTO_LENGTH, &message);
	napi_create_error(env, code, message, &error);
	napi_throw(env, error);
	return NULL;
}

static int get_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv)
{
	size_t argc = want;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok)
		return -1;
	if (argc < want) {
		napi_throw_type_error(env, NULL, "canopy_bpf: too few arguments");
		return -1;
	}
	return 0;
}

static int get_i32(napi_env env, napi_value v, int32_t *out)
{
	if (napi_get_value_int32(env, v, out) != napi_ok) {
		napi_throw_type_error(env, NULL, "canopy_bpf: expected an integer");
		return -1;
	}
	return 0;
}

static int get_string(napi_env env, napi_value v, char *buf, size_t size)
{
	size_t len;

	if (napi_get_value_string_utf8(env, v, buf, size, &len) != napi_ok) {
		napi_throw_type_error(env, NULL, "canopy_bpf: expected a string");
		return -1;
	}
	if (len >= size - 1) {
		napi_throw_range_error(env, NULL, "canopy_bpf: string too long");
		return -1;
	}
	return 0;
}

static int get_buffer(napi_env env, napi_value v, void **data, size_t *len)
{
	bool is_buffer = false;

	napi_is_buffer(env, v, &is_buffer);
	if (!is_buffer || napi_get_buffer_info(env, v, data, len) != napi_ok) {
		napi_throw_type_error(env, NULL, "canopy_bpf: expected a Buffer");
		return -1;
	}
	return 0;
}

/* A map as the kernel describes it: its name and the bytes of one key and one value. */
struct map_shape {
	char name[BPF_OBJ_NAME_LEN];
	__u32 key_size;
	/* A per-CPU map's value is one 8-byte-aligned slot per possible CPU. */
	size_t value_size;
};

static bool per_cpu(__u32 type)
{
	return type == BPF_MAP_TYPE_PERCPU_HASH || type == BPF_MAP_TYPE_PERCPU_ARRAY ||
	       type == BPF_MAP_TYPE_LRU_PERCPU_HASH || type == BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE;
}

static int get_map_shape(napi_env env, int fd, struct map_shape *shape)
{
	struct bpf_map_info minfo;
	__u32 len = sizeof(minfo);
	int cpus;

	memset(&minfo, 0, sizeof(minfo));
	if (bpf_obj_get_info_by_fd(fd, &minfo, &len)) {
		throw_errno(env, errno, "map info of fd %d", fd);
		return -1;
	}
	memcpy(shape->name, minfo.name, sizeof(shape->name));
	shape->name[sizeof(shape->name) - 1] = '\0';
	shape->key_size = minfo.key_size;
	shape->value_size = minfo.value_size;
	if (per_cpu(minfo.type)) {
		cpus = libbpf_num_possible_cpus();
		if (cpus < 0) {
			throw_errno(env, cpus, "count possible CPUs");
			return -1;
		}
		shape->value_size = (((size_t)minfo.value_size + 7) / 8) * 8 * (size_t)cpus;
	}
	return 0;
}

/*
 * Refuses a Buffer of `got` bytes where the map needs `want`: the kernel reads
 * (keys, values in) or writes (values out) exactly `want`, so a shorter Buffer
 * would be overrun and a longer one says the caller's layout is not the map's.
 */
static int check_size(napi_env env, const struct map_shape *shape, int fd, const char *op, const char *what,
		      size_t got, size_t want)
{
	char msg[256];
	napi_value code, message, error;

	if (got == want)
		return 0;
	snprintf(msg, sizeof(msg), "%s of map %s (fd %d): the %s Buffer has %zu bytes, the map's need %zu", op,
		 shape->name[0] ? shape->name : "(unnamed)", fd, what, got, want);
	napi_create_string_utf8(env, "CANOPY_BPF_BUFFER", NAPI_AUTO_LENGTH, &code);
	napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message);
	napi_create_range_error(env, code, message, &error);
	napi_throw(env, error);
	return -1;
}

static napi_value make_i32(napi_env env, int32_t v)
{
	napi_value out;

	napi_create_int32(env, v, &out);
	return out;
}

static napi_value make_bool(napi_env env, bool v)
{
	napi_value out;

	napi_get_boolean(env, v, &out);
	return out;
}

/* libbpf prints through this; keep its warnings on stderr, drop debug chatter. */
static int print_fn(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, args);
}

/*
 * load(objectPath, pinDir, maxEntries: {mapName: n}) ->
 *   { maps: {name: fd}, programs: {name: fd}, reused: [mapName...], maxEntries: {name: n} }
 * Every map is pinned at pinDir/<name>; a map already pinned there is reused
 * (libbpf checks that its type, key and value sizes agree), which is how a
 * restarted agent keeps the datapath's state; a reused map keeps its size.
 */
static napi_value load(napi_env env, napi_callback_info info)
{
	napi_value argv[3], result, maps, sizes, progs, reused;
	char path[1024], pin_dir[512], pin_path[1024];
	struct bpf_object *obj;
	struct bpf_map *map;
	struct bpf_program *prog;
	uint32_t nreused = 0;
	int err;

	if (get_args(env, info, 3, argv) || get_string(env, argv[0], path, sizeof(path)) ||
	    get_string(env, argv[1], pin_dir, sizeof(pin_dir)))
		return NULL;

	obj = bpf_object__open_file(path, NULL);
	if (!obj)
		return throw_errno(env, errno, "open BPF object %s", path);

	CHECK(napi_create_array(env, &reused));
	bpf_object__for_each_map(map, obj) {
		const char *name = bpf_map__name(map);
		napi_value want;
		bool has = false;
		struct stat st;

		if (name[0] == '.')
			continue; /* .rodata/.bss: not part of the ABI */
		snprintf(pin_path, sizeof(pin_path), "%s/%s", pin_dir, name);
		if (napi_has_named_property(env, argv[2], name, &has) == napi_ok && has) {
			int32_t n;

			CHECK(napi_get_named_property(env, argv[2], name, &want));
			if (get_i32(env, want, &n))
				goto fail;
			err = bpf_map__set_max_entries(map, (uint32_t)n);
			if (err) {
				throw_errno(env, err, "set max_entries of %s to %d", name, n);
				goto fail;
			}
		}
		if (stat(pin_path, &st) == 0) {
			struct bpf_map_info minfo;
			__u32 mlen = sizeof(minfo);
			napi_value n;
			int pfd;

			/* A pinned map keeps its size: reuse it as it is, whatever was asked. */
			memset(&minfo, 0, sizeof(minfo));
			pfd = bpf_obj_get(pin_path);
			if (pfd >= 0 && bpf_obj_get_info_by_fd(pfd, &minfo, &mlen) == 0)
				bpf_map__set_max_entries(map, minfo.max_entries);
			if (pfd >= 0)
				close(pfd);
			CHECK(napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &n));
			CHECK(napi_set_element(env, reused, nreused++, n));
		}
		err = bpf_map__set_pin_path(map, pin_path);
		if (err) {
			throw_errno(env, err, "set pin path %s", pin_path);
			goto fail;
		}
	}

	err = bpf_object__load(obj);
	if (err) {
		throw_errno(env, err, "load BPF object %s (pinned maps in %s must match its map definitions)", path, pin_dir);
		goto fail;
	}

	CHECK(napi_create_object(env, &result));
	CHECK(napi_create_object(env, &maps));
	CHECK(napi_create_object(env, &sizes));
	CHECK(napi_create_object(env, &progs));
	bpf_object__for_each_map(map, obj) {
		const char *name = bpf_map__name(map);

		if (name[0] == '.')
			continue;
		/* dup: the object (and its fds) is closed below, the maps stay open for JS. */
		CHECK(napi_set_named_property(env, maps, name, make_i32(env, dup(bpf_map__fd(map)))));
		CHECK(napi_set_named_property(env, sizes, name, make_i32(env, (int32_t)bpf_map__max_entries(map))));
	}
	bpf_object__for_each_program(prog, obj) {
		CHECK(napi_set_named_property(env, progs, bpf_program__name(prog),
					      make_i32(env, dup(bpf_program__fd(prog)))));
	}
	bpf_object__close(obj);
	CHECK(napi_set_named_property(env, result, "maps", maps));
	CHECK(napi_set_named_property(env, result, "programs", progs));
	CHECK(napi_set_named_property(env, result, "reused", reused));
	CHECK(napi_set_named_property(env, result, "maxEntries", sizes));
	return result;
fail:
	bpf_object__close(obj);
	return NULL;
}

/* objGet(path) -> fd of a pinned map or program. */
static napi_value obj_get(napi_env env, napi_callback_info info)
{
	napi_value argv[1];
	char path[1024];
	int fd;

	if (get_args(env, info, 1, argv) || get_string(env, argv[0], path, sizeof(path)))
		return NULL;
	fd = bpf_obj_get(path);
	if (fd < 0)
		return throw_errno(env, errno, "open pinned object %s", path);
	return make_i32(env, fd);
}

/* objPin(fd, path) */
static napi_value obj_pin(napi_env env, napi_callback_info info)
{
	napi_value argv[2];
	char path[1024];
	int32_t fd;

	if (get_args(env, info, 2, argv) || get_i32(env, argv[0], &fd) || get_string(env, argv[1], path, sizeof(path)))
		return NULL;
	if (bpf_obj_pin(fd, path))
		return throw_errno(env, errno, "pin at %s", path);
	return NULL;
}

/* progId(fd) -> the kernel's id of a program (or map) fd. */
static napi_value prog_id(napi_env env, napi_callback_info info)
{
	napi_value argv[1];
	struct bpf_prog_info pinfo;
	__u32 len = sizeof(pinfo);
	int32_t fd;

	if (get_args(env, info, 1, argv) || get_i32(env, argv[0], &fd))
		return NULL;
	memset(&pinfo, 0, sizeof(pinfo));
	if (bpf_obj_get_info_by_fd(fd, &pinfo, &len))
		return throw_errno(env, errno, "program info of fd %d", fd);
	return make_i32(env, (int32_t)pinfo.id);
}

/* progTag(fd) -> the program's tag (hex): a hash of its instructions, equal for equal builds. */
static napi_value prog_tag(napi_env env, napi_callback_info info)
{
	napi_value argv[1], out;
	struct bpf_prog_info pinfo;
	__u32 len = sizeof(pinfo);
	char hex[2 * BPF_TAG_SIZE + 1];
	int32_t fd;

	if (get_args(env, info, 1, argv) || get_i32(env, argv[0], &fd))
		return NULL;
	memset(&pinfo, 0, sizeof(pinfo));
	if (bpf_obj_get_info_by_fd(fd, &pinfo, &len))
		return throw_errno(env, errno, "program info of fd %d", fd);
	for (int i = 0; i < BPF_TAG_SIZE; i++)
		snprintf(hex + 2 * i, 3, "%02x", pinfo.tag[i]);
	CHECK(napi_create_string_utf8(env, hex, NAPI_AUTO_LENGTH, &out));
	return out;
}

static int open_cgroup(napi_env env, napi_value v, char *path, size_t size)
{
	int fd;

	if (get_string(env, v, path, size))
		return -1;
	fd = open(path, O_RDONLY | O_DIRECTORY);
	if (fd < 0) {
		throw_errno(env, errno, "open cgroup %s", path);
		return -1;
	}
	return fd;
}

/*
 * The cgroup hook a call is about: an optional trailing argument at index
 * `at`, 6 for cgroup/connect6, a hook name ("getpeername4", "recvmsg6", ...),
 * else (4 or absent) cgroup/connect4.
 */
static enum bpf_attach_type connect_type(napi_env env, napi_callback_info info, size_t at)
{
	static const struct {
		const char *name;
		enum bpf_attach_type type;
	} hooks[] = {
		{ "connect4", BPF_CGROUP_INET4_CONNECT },	 { "connect6", BPF_CGROUP_INET6_CONNECT },
		{ "getpeername4", BPF_CGROUP_INET4_GETPEERNAME }, { "getpeername6", BPF_CGROUP_INET6_GETPEERNAME },
		{ "recvmsg4", BPF_CGROUP_UDP4_RECVMSG },	 { "recvmsg6", BPF_CGROUP_UDP6_RECVMSG },
		{ "sendmsg4", BPF_CGROUP_UDP4_SENDMSG },	 { "sendmsg6", BPF_CGROUP_UDP6_SENDMSG },
	};
	napi_value argv[4];
	napi_valuetype t;
	size_t argc = 4;
	int32_t family = 4;
	char name[32];

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc <= at)
		return BPF_CGROUP_INET4_CONNECT;
	if (napi_typeof(env, argv[at], &t) == napi_ok && t == napi_string) {
		size_t len = 0;

		if (napi_get_value_string_utf8(env, argv[at], name, sizeof(name), &len) == napi_ok)
			for (size_t i = 0; i < sizeof(hooks) / sizeof(hooks[0]); i++)
				if (strcmp(hooks[i].name, name) == 0)
					return hooks[i].type;
		return BPF_CGROUP_INET4_CONNECT;
	}
	napi_get_value_int32(env, argv[at], &family);
	return family == 6 ? BPF_CGROUP_INET6_CONNECT : BPF_CGROUP_INET4_CONNECT;
}

/*
 * replaceConnect4(newProgFd, oldProgFd, cgroupPath[, family]): swaps one attached
 * connect4 program for another in a single step (BPF_F_REPLACE), so no
 * connect() runs with neither or both.
 */
static napi_value replace_connect4(napi_env env, napi_callback_info info)
{
	LIBBPF_OPTS(bpf_prog_attach_opts, opts);
	napi_value argv[3];
	char path[1024];
	int32_t new_fd, old_fd;
	int cg, err;

	if (get_args(env, info, 3, argv) || get_i32(env, argv[0], &new_fd) || get_i32(env, argv[1], &old_fd))
		return NULL;
	cg = open_cgroup(env, argv[2], path, sizeof(path));
	if (cg < 0)
		return NULL;
	opts.flags = BPF_F_ALLOW_MULTI | BPF_F_REPLACE;
	opts.replace_prog_fd = old_fd;
	err = bpf_prog_attach_opts(new_fd, cg, connect_type(env, info, 3), &opts);
	if (err) {
		int e = errno;

		close(cg);
		return throw_errno(env, e, "replace the connect4 program of cgroup %s", path);
	}
	close(cg);
	return NULL;
}

/* Attaches (BPF_F_ALLOW_MULTI) or detaches a connect4 program on a cgroup. */
static napi_value connect4_op(napi_env env, napi_callback_info info, bool attach)
{
	napi_value argv[2];
	char path[1024];
	int32_t prog_fd;
	int cg, err;

	if (get_args(env, info, 2, argv) || get_i32(env, argv[0], &prog_fd))
		return NULL;
	cg = open_cgroup(env, argv[1], path, sizeof(path));
	if (cg < 0)
		return NULL;
	err = attach ? bpf_prog_attach(prog_fd, cg, connect_type(env, info, 2), BPF_F_ALLOW_MULTI)
		     : bpf_prog_detach2(prog_fd, cg, connect_type(env, info, 2));
	if (err) {
		int e = errno;

		close(cg);
		return throw_errno(env, e, "%s connect4 program %s cgroup %s", attach ? "attach" : "detach",
				   attach ? "to" : "from", path);
	}
	close(cg);
	return NULL;
}

/* attachConnect4(progFd, cgroupPath[, family]) */
static napi_value attach_connect4(napi_env env, napi_callback_info info)
{
	return connect4_op(env, info, true);
}

/* detachConnect4(progFd, cgroupPath[, family]) */
static napi_value detach_connect4(napi_env env, napi_callback_info info)
{
	return connect4_op(env, info, false);
}

/* queryConnect4(cgroupPath[, family]) -> [program ids attached directly to the cgroup] */
static napi_value query_connect4(napi_env env, napi_callback_info info)
{
	napi_value argv[1], out;
	char path[1024];
	__u32 ids[64], count = 64, flags = 0;
	int cg;

	if (get_args(env, info, 1, argv))
		return NULL;
	cg = open_cgroup(env, argv[0], path, sizeof(path));
	if (cg < 0)
		return NULL;
	if (bpf_prog_query(cg, connect_type(env, info, 1), 0, &flags, ids, &count)) {
		int e = errno;

		close(cg);
		return throw_errno(env, e, "query connect4 programs of cgroup %s", path);
	}
	close(cg);
	CHECK(napi_create_array_with_length(env, count, &out));
	for (__u32 i = 0; i < count; i++)
		CHECK(napi_set_element(env, out, i, make_i32(env, (int32_t)ids[i])));
	return out;
}

/* close(fd) */
static napi_value close_fd(napi_env env, napi_callback_info info)
{
	napi_value argv[1];
	int32_t fd;

	if (get_args(env, info, 1, argv) || get_i32(env, argv[0], &fd))
		return NULL;
	close(fd);
	return NULL;
}

/* mapUpdate(fd, key, value, flags) */
static napi_value map_update(napi_env env, napi_callback_info info)
{
	struct map_shape shape;
	napi_value argv[4];
	void *key, *value;
	size_t klen, vlen;
	int32_t fd, flags;

	if (get_args(env, info, 4, argv) || get_i32(env, argv[0], &fd) || get_buffer(env, argv[1], &key, &klen) ||
	    get_buffer(env, argv[2], &value, &vlen) || get_i32(env, argv[3], &flags) || get_map_shape(env, fd, &shape) ||
	    check_size(env, &shape, fd, "update", "key", klen, shape.key_size) ||
	    check_size(env, &shape, fd, "update", "value", vlen, shape.value_size))
		return NULL;
	if (bpf_map_update_elem(fd, key, value, (__u64)flags))
		return throw_errno(env, errno, "map update (fd %d)", fd);
	return NULL;
}

/* mapLookup(fd, key, valueOut) -> found */
static napi_value map_lookup(napi_env env, napi_callback_info info)
{
	struct map_shape shape;
	napi_value argv[3];
	void *key, *value;
	size_t klen, vlen;
	int32_t fd;

	if (get_args(env, info, 3, argv) || get_i32(env, argv[0], &fd) || get_buffer(env, argv[1], &key, &klen) ||
	    get_buffer(env, argv[2], &value, &vlen) || get_map_shape(env, fd, &shape) ||
	    check_size(env, &shape, fd, "lookup", "key", klen, shape.key_size) ||
	    check_size(env, &shape, fd, "lookup", "value", vlen, shape.value_size))
		return NULL;
	if (bpf_map_lookup_elem(fd, key, value)) {
		if (errno == ENOENT)
			return make_bool(env, false);
		return throw_errno(env, errno, "map lookup (fd %d)", fd);
	}
	return make_bool(env, true);
}

/* mapDelete(fd, key) -> deleted */
static napi_value map_delete(napi_env env, napi_callback_info info)
{
	struct map_shape shape;
	napi_value argv[2];
	void *key;
	size_t klen;
	int32_t fd;

	if (get_args(env, info, 2, argv) || get_i32(env, argv[0], &fd) || get_buffer(env, argv[1], &key, &klen) ||
	    get_map_shape(env, fd, &shape) || check_size(env, &shape, fd, "delete", "key", klen, shape.key_size))
		return NULL;
	if (bpf_map_delete_elem(fd, key)) {
		if (errno == ENOENT)
			return make_bool(env, false);
		return throw_errno(env, errno, "map delete (fd %d)", fd);
	}
	return make_bool(env, true);
}

/* mapNextKey(fd, key | null, keyOut) -> found */
static napi_value map_next_key(napi_env env, napi_callback_info info)
{
	struct map_shape shape;
	napi_value argv[3];
	napi_valuetype t;
	void *key = NULL, *out;
	size_t klen, olen;
	int32_t fd;

	if (get_args(env, info, 3, argv) || get_i32(env, argv[0], &fd) || get_buffer(env, argv[2], &out, &olen) ||
	    get_map_shape(env, fd, &shape) || check_size(env, &shape, fd, "next key", "key out", olen, shape.key_size))
		return NULL;
	napi_typeof(env, argv[1], &t);
	if (t != napi_null && t != napi_undefined &&
	    (get_buffer(env, argv[1], &key, &klen) || check_size(env, &shape, fd, "next key", "key", klen, shape.key_size)))
		return NULL;
	if (bpf_map_get_next_key(fd, key, out)) {
		if (errno == ENOENT)
			return make_bool(env, false);
		return throw_errno(env, errno, "map next key (fd %d)", fd);
	}
	return make_bool(env, true);
}

/* mapUpdateBatch(fd, keys, values, count, flags) -> entries written */
static napi_value map_update_batch(napi_env env, napi_callback_info info)
{
	struct map_shape shape;
	napi_value argv[5];
	void *keys, *values;
	size_t klen, vlen;
	int32_t fd, count, flags;
	__u32 n;

	if (get_args(env, info, 5, argv) || get_i32(env, argv[0], &fd) || get_buffer(env, argv[1], &keys, &klen) ||
	    get_buffer(env, argv[2], &values, &vlen) || get_i32(env, argv[3], &count) || get_i32(env, argv[4], &flags))
		return NULL;
	if (count <= 0)
		return make_i32(env, 0);
	if (get_map_shape(env, fd, &shape) ||
	    check_size(env, &shape, fd, "batch update", "keys", klen, (size_t)count * shape.key_size) ||
	    check_size(env, &shape, fd, "batch update", "values", vlen, (size_t)count * shape.value_size))
		return NULL;
	n = (__u32)count;
	LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = (__u64)flags);
	if (bpf_map_update_batch(fd, keys, values, &n, &opts))
		return throw_errno(env, errno, "map batch update of %d entries (fd %d, %u written)", count, fd, n);
	return make_i32(env, (int32_t)n);
}

/* mapDeleteBatch(fd, keys, count) -> entries deleted */
static napi_value map_delete_batch(napi_env env, napi_callback_info info)
{
	struct map_shape shape;
	napi_value argv[3];
	void *keys;
	size_t klen;
	int32_t fd, count;
	__u32 n;

	if (get_args(env, info, 3, argv) || get_i32(env, argv[0], &fd) || get_buffer(env, argv[1], &keys, &klen) ||
	    get_i32(env, argv[2], &count))
		return NULL;
	if (count <= 0)
		return make_i32(env, 0);
	if (get_map_shape(env, fd, &shape) ||
	    check_size(env, &shape, fd, "batch delete", "keys", klen, (size_t)count * shape.key_size))
		return NULL;
	n = (__u32)count;
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	if (bpf_map_delete_batch(fd, keys, &n, &opts))
		return throw_errno(env, errno, "map batch delete of %d entries (fd %d, %u deleted)", count, fd, n);
	return make_i32(env, (int32_t)n);
}

/* testRun(progFd, ctx) -> { retval, duration }; the kernel writes a syscall program's ctx back into ctx_in. */
static napi_value test_run(napi_env env, napi_callback_info info)
{
	napi_value argv[2], out;
	void *ctx;
	size_t clen;
	int32_t fd;
	napi_value v;

	if (get_args(env, info, 2, argv) || get_i32(env, argv[0], &fd) || get_buffer(env, argv[1], &ctx, &clen))
		return NULL;
	LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = ctx, .ctx_size_in = (__u32)clen);
	if (bpf_prog_test_run_opts(fd, &opts))
		return throw_errno(env, errno, "BPF_PROG_TEST_RUN (fd %d)", fd);
	CHECK(napi_create_object(env, &out));
	napi_create_uint32(env, opts.retval, &v);
	CHECK(napi_set_named_property(env, out, "retval", v));
	napi_create_uint32(env, opts.duration, &v);
	CHECK(napi_set_named_property(env, out, "duration", v));
	return out;
}

/* possibleCpus() -> n, for sizing per-CPU map values */
static napi_value possible_cpus(napi_env env, napi_callback_info info)
{
	int n = libbpf_num_possible_cpus();

	(void)info;
	if (n < 0)
		return throw_errno(env, n, "count possible CPUs");
	return make_i32(env, n);
}

/* progStats(fd) -> { runTimeNs, runCnt }: the kernel's run-time counters of a
 * program (they count only while statistics are enabled: enableStats). */
static napi_value prog_stats(napi_env env, napi_callback_info info)
{
	napi_value argv[1], out, v;
	struct bpf_prog_info pinfo;
	__u32 len = sizeof(pinfo);
	int32_t fd;

	if (get_args(env, info, 1, argv) || get_i32(env, argv[0], &fd))
		return NULL;
	memset(&pinfo, 0, sizeof(pinfo));
	if (bpf_obj_get_info_by_fd(fd, &pinfo, &len))
		return throw_errno(env, errno, "program info of fd %d", fd);
	CHECK(napi_create_object(env, &out));
	CHECK(napi_create_double(env, (double)pinfo.run_time_ns, &v));
	CHECK(napi_set_named_property(env, out, "runTimeNs", v));
	CHECK(napi_create_double(env, (double)pinfo.run_cnt, &v));
	CHECK(napi_set_named_property(env, out, "runCnt", v));
	return out;
}

/* enableStats() -> fd: BPF run-time statistics are on while the fd is open (BPF_ENABLE_STATS). */
static napi_value enable_stats(napi_env env, napi_callback_info info)
{
	int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);

	(void)info;
	if (fd < 0)
		return throw_errno(env, errno, "BPF_ENABLE_STATS");
	return make_i32(env, fd);
}

static napi_value init(napi_env env, napi_value exports)
{
	const struct {
		const char *name;
		napi_callback fn;
	} fns[] = {
		{ "load", load },
		{ "objGet", obj_get },
		{ "objPin", obj_pin },
		{ "progId", prog_id },
		{ "progTag", prog_tag },
		{ "replaceConnect4", replace_connect4 },
		{ "attachConnect4", attach_connect4 },
		{ "detachConnect4", detach_connect4 },
		{ "queryConnect4", query_connect4 },
		{ "close", close_fd },
		{ "mapUpdate", map_update },
		{ "mapLookup", map_lookup },
		{ "mapDelete", map_delete },
		{ "mapNextKey", map_next_key },
		{ "mapUpdateBatch", map_update_batch },
		{ "mapDeleteBatch", map_delete_batch },
		{ "testRun", test_run },
		{ "possibleCpus", possible_cpus },
		{ "progStats", prog_stats },
		{ "enableStats", enable_stats },
	};

	libbpf_set_print(print_fn);
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		napi_value f;

		CHECK(napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &f));
		CHECK(napi_set_named_property(env, exports, fns[i].name, f));
	}
	return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
