/*
 * link.c - the TCP link between a node collector and the head of a
 * multi-host run (link.h; docs/MULTIHOST.md, "The link"; the frames are in
 * docs/TRACE_FORMAT.md, "Link frames"; the threat model in
 * docs/SECURITY.md, "Multi-host runs").
 *
 * The cryptography is libsodium's: random nonces and keys
 * (randombytes_buf), HMAC-SHA-256 (crypto_auth_hmacsha256_*) for the
 * proofs and the session keys, constant-time comparison
 * (crypto_verify_32), and an AEAD for every frame after the handshake
 * (AES-256-GCM where both ends have the instructions for it, else
 * ChaCha20-Poly1305). Nothing here is hand-made cryptography; this file
 * frames bytes, counts nonces and keeps deadlines.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>
#include <sodium.h>

#include "link.h"

#define NONCE_LEN 32
#define MAC_LEN crypto_auth_hmacsha256_BYTES
#define TAG_LEN LINK_AEAD_TAG
#define CHALLENGE_LEN (LINK_RUN_ID_LEN + NONCE_LEN)
#define REFUSE_MAX 256u
/* Bytes the head reads from a connection at a time: DATA is handed to
 * cb->data straight from this buffer, so it bounds what a connection holds. */
#define HEAD_READ_BUF (64u * 1024u)
/* Connections that have not proved the key yet, at most: more are refused
 * at once (each holds a read buffer until its deadline). */
#define HEAD_MAX_PENDING 64
/* The node writes DATA frames of at most this many bytes of stream. */
#define NODE_FRAME_MAX (256u * 1024u)
/* A send this long is sealed from the caller's bytes at once; shorter
 * ones (a model stream record is often tens of bytes) are gathered into
 * frames, written when one is full and before the loop waits. */
#define NODE_GATHER_MAX (64u * 1024u)

/* Keys of the node's info (a msgpack map in PROVE). */
enum {
	INFO_HOST = 1,
	INFO_LAUNCHER_PID = 2,
	INFO_LAUNCHED_AS = 3,
	INFO_FALLBACK = 4,
	INFO_CIPHERS = 5 /* uint: bit (1 << CIPHER_*) for each the node has */
};

/* What protects the frames after the handshake: the head picks, among
 * what the node has. NONE (link_head_set_plain) leaves them as they are,
 * the tag's 16 bytes zero, so that frames keep one layout. */
enum { CIPHER_CHACHA20POLY1305 = 1, CIPHER_AES256GCM = 2, CIPHER_NONE = 3 };

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void frame_head(uint8_t *h, unsigned type, uint32_t len)
{
	h[0] = LINK_MAGIC0;
	h[1] = LINK_MAGIC1;
	h[2] = LINK_VERSION;
	h[3] = (uint8_t)type;
	put_le32(h + 4, len);
}

/* ---- the run's key ------------------------------------------------------ */

int link_key_dir(char *buf, size_t cap)
{
	const char *dir = getenv("FORKTRACE_KEY_DIR");
	int n;

	if (dir && *dir) {
		n = snprintf(buf, cap, "%s", dir);
	} else {
		const char *home = getenv("HOME");
		if (!home || !*home)
			return -ENOENT;
		n = snprintf(buf, cap, "%s/.forktrace/keys", home);
	}
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static bool is_run_id(const char *s)
{
	size_t i;

	for (i = 0; i < LINK_RUN_ID_LEN; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[i] == '\0';
}

/*
 * Creates each missing directory of dir 0700, then checks that dir is a
 * directory of this user that no one else may write to: another user who
 * could would be able to remove the key file, or put one of theirs beside
 * it.
 */
static int key_dir_make(const char *dir)
{
	char path[PATH_MAX];
	size_t n = strlen(dir);
	struct stat st;

	if (n == 0 || n >= sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, dir, n + 1);
	for (char *p = path + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			return -errno;
		*p = c;
		if (c == '\0')
			break;
	}
	if (stat(dir, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))
		return -EPERM;
	return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int link_key_create(const char *dir, char run_id[LINK_RUN_ID_LEN + 1], uint8_t key[LINK_KEY_LEN],
		    char *path, size_t cap)
{
	char text[2 * LINK_KEY_LEN + 2];
	int rc, fd = -1;

	if (sodium_init() < 0)
		return -EIO;
	rc = key_dir_make(dir);
	if (rc < 0)
		return rc;
	/* A run id another run already took (one in 2^64) just draws again. */
	for (int tries = 0; fd < 0 && tries < 8; tries++) {
		uint8_t id[LINK_RUN_ID_LEN / 2];
		randombytes_buf(id, sizeof(id));
		sodium_bin2hex(run_id, LINK_RUN_ID_LEN + 1, id, sizeof(id));
		int n = snprintf(path, cap, "%s/%s.key", dir, run_id);
		if (n < 0 || (size_t)n >= cap)
			return -ENAMETOOLONG;
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			return -errno;
	}
	if (fd < 0)
		return -EEXIST;
	randombytes_buf(key, LINK_KEY_LEN);
	sodium_bin2hex(text, sizeof(text), key, LINK_KEY_LEN);
	text[2 * LINK_KEY_LEN] = '\n';
	/* The umask may only have narrowed 0600; make it exactly that. */
	rc = fchmod(fd, 0600) < 0 ? -errno : 0;
	if (rc == 0)
		rc = write_all(fd, text, 2 * LINK_KEY_LEN + 1);
	/* On a shared filesystem the nodes read it from other hosts. */
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	sodium_memzero(text, sizeof(text));
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc < 0) {
		unlink(path);
		sodium_memzero(key, LINK_KEY_LEN);
	}
	return rc;
}

int link_key_read(const char *dir, const char *run_id, uint8_t key[LINK_KEY_LEN], const char **why)
{
	char path[PATH_MAX], text[2 * LINK_KEY_LEN + 3];
	const char *hex_end;
	struct stat st;
	size_t bin_len;
	ssize_t n;
	int fd, rc;

	*why = NULL;
	if (sodium_init() < 0) {
		*why = "libsodium failed to start";
		return -EIO;
	}
	if (!is_run_id(run_id)) {
		*why = "not a run id (16 hex digits)";
		return -EINVAL;
	}
	n = snprintf(path, sizeof(path), "%s/%s.key", dir, run_id);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		*why = "path too long";
		return -ENAMETOOLONG;
	}
	/* O_NONBLOCK: a FIFO put in the key's place must not hang the open. */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		rc = -errno;
		*why = rc == -ELOOP    ? "a symbolic link"
		       : rc == -ENOENT ? "no such file (is the key directory shared with the head?)"
		       : rc == -EACCES ? "not readable by this user"
				       : "cannot be opened";
		return rc == -ELOOP ? -EPERM : rc;
	}
	rc = -EPERM;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		*why = "cannot be examined";
	} else if (!S_ISREG(st.st_mode)) {
		*why = "not a regular file";
	} else if (st.st_uid != geteuid()) {
		*why = "owned by another user";
	} else if (st.st_mode & S_IRWXG) {
		*why = "group-readable or -writable (chmod 600)";
	} else if (st.st_mode & S_IRWXO) {
		*why = "readable or writable by other users (chmod 600)";
	} else {
		do
			n = read(fd, text, sizeof(text) - 1);
		while (n < 0 && errno == EINTR);
		rc = -EINVAL;
		if (n < 0) {
			rc = -errno;
			*why = "cannot be read";
		} else if ((n == 2 * LINK_KEY_LEN ||
			    (n == 2 * LINK_KEY_LEN + 1 && text[2 * LINK_KEY_LEN] == '\n')) &&
			   sodium_hex2bin(key, LINK_KEY_LEN, text, 2 * LINK_KEY_LEN, NULL, &bin_len,
					  &hex_end) == 0 &&
			   bin_len == LINK_KEY_LEN) {
			rc = 0;
		} else {
			*why = "not a key file (64 hex digits)";
		}
	}
	sodium_memzero(text, sizeof(text));
	close(fd);
	return rc;
}

/* ---- frames ------------------------------------------------------------- */

void link_frame_limits(unsigned type, uint32_t *min, uint32_t *max)
{
	uint32_t lo = 1, hi = 0; /* nothing fits: not a type */

	switch (type) {
	case LINK_CHALLENGE:
		lo = hi = CHALLENGE_LEN;
		break;
	case LINK_PROVE:
		lo = NONCE_LEN + MAC_LEN;
		hi = LINK_AUTH_MAX;
		break;
	case LINK_ACCEPT:
		lo = hi = MAC_LEN + 1;
		break;
	case LINK_REFUSE:
		lo = 0;
		hi = REFUSE_MAX;
		break;
	case LINK_DATA:
		lo = TAG_LEN;
		hi = LINK_DATA_MAX;
		break;
	case LINK_PING:
		lo = hi = 8 + TAG_LEN;
		break;
	case LINK_PONG:
		lo = hi = 16 + TAG_LEN;
		break;
	case LINK_END:
	case LINK_END_ACK:
		lo = hi = TAG_LEN;
		break;
	}
	*min = lo;
	*max = hi;
}

int link_parse(link_parser *p, const uint8_t *bytes, size_t n, link_frame_fn fn, void *arg)
{
	size_t i = 0;
	int rc;

	for (;;) {
		if (p->head_len < LINK_HEADER_SIZE) {
			/* Each header byte is judged as it comes, so that garbage
			 * is refused at once, not after a header's worth. */
			while (p->head_len < LINK_HEADER_SIZE && i < n) {
				uint8_t b = bytes[i++];
				p->head[p->head_len++] = b;
				if ((p->head_len == 1 && b != LINK_MAGIC0) ||
				    (p->head_len == 2 && b != LINK_MAGIC1))
					return LINK_ERR_MAGIC;
				if (p->head_len == 3 && b != LINK_VERSION)
					return LINK_ERR_VERSION;
				if (p->head_len == 4 && (b >= 32 || !((p->allowed >> b) & 1u)))
					return LINK_ERR_TYPE;
			}
			if (p->head_len < LINK_HEADER_SIZE)
				return 0;
			uint32_t min, max;
			p->type = p->head[3];
			p->len = get_le32(p->head + 4);
			p->got = 0;
			link_frame_limits(p->type, &min, &max);
			if (p->len < min || p->len > max)
				return LINK_ERR_LENGTH;
			if (p->len == 0) {
				p->head_len = 0;
				rc = fn(arg, p->type, p->small, 0, true);
				if (rc)
					return rc;
			}
			continue;
		}
		if (i == n)
			return 0;
		size_t take = n - i;
		if (take > p->len - p->got)
			take = p->len - p->got;
		p->got += (uint32_t)take;
		bool last = p->got == p->len;
		if (p->type == LINK_DATA) {
			/* DATA goes on as it arrives: nothing of it is held. */
			if (last)
				p->head_len = 0;
			rc = fn(arg, LINK_DATA, bytes + i, take, last);
			i += take;
			if (rc)
				return rc;
			continue;
		}
		memcpy(p->small + p->got - take, bytes + i, take);
		i += take;
		if (last) {
			p->head_len = 0;
			rc = fn(arg, p->type, p->small, p->len, true);
			if (rc)
				return rc;
		}
	}
}

const char *link_strerror(int err)
{
	/* clang-format off */
	switch (err) {
	case LINK_ERR_MAGIC: return "bytes that are not a link frame";
	case LINK_ERR_VERSION: return "a link frame of another protocol version";
	case LINK_ERR_TYPE: return "a frame it may not send at that point";
	case LINK_ERR_LENGTH: return "a frame of a length its type does not allow";
	default: return err < 0 ? strerror(-err) : "no error";
	}
	/* clang-format on */
}

/*
 * The proofs of the handshake: HMAC-SHA-256 under the run's key over a
 * tag saying who proves (so that a proof cannot be sent back as the
 * other side's), the run id, the prover's peer's nonce first, then its
 * own, the node's info (so that the info the head acts on is the node's)
 * and, in the head's, the cipher it picked. The session keys are made
 * the same way, with tags of their own: fresh nonces on both sides make
 * them new for each connection.
 */
static void handshake_mac(const uint8_t key[LINK_KEY_LEN], const char *tag, const char *run_id,
			  const uint8_t *first, const uint8_t *second, const uint8_t *info,
			  size_t info_len, const uint8_t *extra, size_t extra_len,
			  uint8_t out[MAC_LEN])
{
	crypto_auth_hmacsha256_state st;

	crypto_auth_hmacsha256_init(&st, key, LINK_KEY_LEN);
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)tag, strlen(tag) + 1);
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)run_id, LINK_RUN_ID_LEN);
	crypto_auth_hmacsha256_update(&st, first, NONCE_LEN);
	crypto_auth_hmacsha256_update(&st, second, NONCE_LEN);
	crypto_auth_hmacsha256_update(&st, info, info_len);
	if (extra_len)
		crypto_auth_hmacsha256_update(&st, extra, extra_len);
	crypto_auth_hmacsha256_final(&st, out);
	sodium_memzero(&st, sizeof(st));
}

static const char TAG_NODE[] = "forktrace link node";
static const char TAG_HEAD[] = "forktrace link head";
static const char TAG_NODE_KEY[] = "forktrace link node to head";
static const char TAG_HEAD_KEY[] = "forktrace link head to node";

/*
 * One direction of a connection after the handshake: its key, and the
 * number of frames sealed (or opened) so far, which is the nonce. A
 * frame's header is its additional data, so that its type and length are
 * authenticated too; a frame dropped, replayed or moved breaks the count
 * and fails to open.
 */
typedef struct link_aead {
	int cipher;
	uint8_t key[crypto_aead_aes256gcm_KEYBYTES];
	crypto_aead_aes256gcm_state aes;
	uint64_t count;
} link_aead;

static unsigned ciphers_here(void)
{
	return 1u << CIPHER_CHACHA20POLY1305 | 1u << CIPHER_NONE |
	       (crypto_aead_aes256gcm_is_available() ? 1u << CIPHER_AES256GCM : 0);
}

static void aead_init(link_aead *a, int cipher, const uint8_t key[MAC_LEN])
{
	a->cipher = cipher;
	a->count = 0;
	memcpy(a->key, key, sizeof(a->key));
	if (cipher == CIPHER_AES256GCM)
		crypto_aead_aes256gcm_beforenm(&a->aes, a->key);
}

static void aead_wipe(link_aead *a)
{
	sodium_memzero(a, sizeof(*a));
}

static void aead_nonce(link_aead *a, uint8_t nonce[12])
{
	memset(nonce, 0, 12);
	put_le64(nonce, a->count++);
}

/* Seals len bytes of m into out (len + TAG_LEN bytes), head the frame's
 * header (already holding the sealed length). */
static void aead_seal(link_aead *a, const uint8_t head[LINK_HEADER_SIZE], const uint8_t *m,
		      size_t len, uint8_t *out)
{
	uint8_t nonce[12];

	aead_nonce(a, nonce);
	if (a->cipher == CIPHER_AES256GCM) {
		crypto_aead_aes256gcm_encrypt_afternm(out, NULL, m, len, head, LINK_HEADER_SIZE,
						      NULL, nonce, &a->aes);
	} else if (a->cipher == CIPHER_CHACHA20POLY1305) {
		crypto_aead_chacha20poly1305_ietf_encrypt(out, NULL, m, len, head, LINK_HEADER_SIZE,
							  NULL, nonce, a->key);
	} else {
		if (len)
			memcpy(out, m, len);
		memset(out + len, 0, TAG_LEN);
	}
}

/* Opens a frame of type with clen sealed bytes into out (clen - TAG_LEN
 * bytes). Returns 0, or -EBADMSG when it does not authenticate. */
static int aead_open(link_aead *a, unsigned type, const uint8_t *c, size_t clen, uint8_t *out)
{
	uint8_t nonce[12], head[LINK_HEADER_SIZE];
	int rc;

	frame_head(head, type, (uint32_t)clen);
	aead_nonce(a, nonce);
	if (a->cipher == CIPHER_AES256GCM) {
		rc = crypto_aead_aes256gcm_decrypt_afternm(out, NULL, NULL, c, clen, head,
							   LINK_HEADER_SIZE, nonce, &a->aes);
	} else if (a->cipher == CIPHER_CHACHA20POLY1305) {
		rc = crypto_aead_chacha20poly1305_ietf_decrypt(out, NULL, NULL, c, clen, head,
							       LINK_HEADER_SIZE, nonce, a->key);
	} else {
		if (clen > TAG_LEN)
			memcpy(out, c, clen - TAG_LEN);
		rc = 0;
	}
	return rc == 0 ? 0 : -EBADMSG;
}

/* Both directions' keys of a connection. */
static void session_keys(const uint8_t key[LINK_KEY_LEN], const char *run_id,
			 const uint8_t *head_nonce, const uint8_t *node_nonce, const uint8_t *info,
			 size_t info_len, uint8_t node_key[MAC_LEN], uint8_t head_key[MAC_LEN])
{
	handshake_mac(key, TAG_NODE_KEY, run_id, head_nonce, node_nonce, info, info_len, NULL, 0,
		      node_key);
	handshake_mac(key, TAG_HEAD_KEY, run_id, head_nonce, node_nonce, info, info_len, NULL, 0,
		      head_key);
}

/* "ADDR:PORT" of a socket address ("[ADDR]:PORT" for IPv6; an IPv4
 * address mapped into IPv6 as plain IPv4). */
static void addr_text(const struct sockaddr_storage *ss, char *out, size_t cap)
{
	char ip[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		snprintf(out, cap, "%s:%u", ip, ntohs(a->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
		if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
			inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], ip, sizeof(ip));
			snprintf(out, cap, "%s:%u", ip, ntohs(a->sin6_port));
		} else {
			inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
			snprintf(out, cap, "[%s]:%u", ip, ntohs(a->sin6_port));
		}
	} else {
		snprintf(out, cap, "(unknown address)");
	}
}

/*
 * Splits "HOST:PORT", "[V6]:PORT" or ":PORT" at its last colon. host may
 * come back empty. Returns 0 or -EINVAL.
 */
static int addr_split(const char *addr, char *host, size_t hcap, char *port, size_t pcap)
{
	const char *colon = strrchr(addr, ':');
	size_t hl, pl;

	if (!colon)
		return -EINVAL;
	hl = (size_t)(colon - addr);
	if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']') {
		addr++;
		hl -= 2;
	}
	pl = strlen(colon + 1);
	if (hl >= hcap || pl == 0 || pl > 5 || pl >= pcap)
		return -EINVAL;
	for (size_t i = 0; i < pl; i++)
		if (colon[1 + i] < '0' || colon[1 + i] > '9')
			return -EINVAL;
	if (atoi(colon + 1) > 65535)
		return -EINVAL;
	memcpy(host, addr, hl);
	host[hl] = '\0';
	memcpy(port, colon + 1, pl + 1);
	return 0;
}

/*
 * Low latency for the clock's round trips; keepalive so that the kernel
 * too gives up on a peer whose host vanished: a probe after
 * LINK_KEEPALIVE_IDLE_S of quiet, then every LINK_KEEPALIVE_INTVL_S, and
 * LINK_KEEPALIVE_CNT unanswered ones end the connection. A live peer's
 * kernel answers them however starved of CPU its process is. The head
 * (user_timeout) also gives up on a connection whose bytes its peer's
 * kernel has not acknowledged for LINK_USER_TIMEOUT_MS: probes are not
 * sent while some are outstanding, and the head sends only PONGs, which
 * a live node's kernel takes at once. Not the node: its DATA may wait
 * on a full window for as long as the head is slow to read.
 */
static void tcp_tune(uv_tcp_t *tcp, bool user_timeout)
{
	int intvl = LINK_KEEPALIVE_INTVL_S, cnt = LINK_KEEPALIVE_CNT;
	unsigned ut = LINK_USER_TIMEOUT_MS;
	uv_os_fd_t fd;

	uv_tcp_nodelay(tcp, 1);
	uv_tcp_keepalive(tcp, 1, LINK_KEEPALIVE_IDLE_S);
	if (uv_fileno((uv_handle_t *)tcp, &fd) == 0) {
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
		if (user_timeout)
			setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof(ut));
	}
}

/* How often a connection's timer looks: a fifth of the idle limit, at
 * most the heartbeat's period (the node pings on it). */
static unsigned tick_ms(unsigned idle_ms)
{
	unsigned tick = idle_ms / 5;

	return tick == 0 ? 1 : tick < LINK_HEARTBEAT_MS ? tick : LINK_HEARTBEAT_MS;
}

/* Bytes the kernel has received on a socket and libuv not yet read: a
 * peer whose bytes wait there is not silent, only unread (the loop was
 * busy). */
static bool unread_bytes(uv_tcp_t *tcp)
{
	uv_os_fd_t fd;
	int n = 0;

	return uv_fileno((uv_handle_t *)tcp, &fd) == 0 && ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

/* ---- the head ----------------------------------------------------------- */

typedef struct link_conn link_conn;

enum conn_state {
	CONN_CHALLENGED, /* sent CHALLENGE, waits for PROVE */
	CONN_ACTIVE,     /* authenticated, joined */
	CONN_ENDED,      /* got END, sends END_ACK */
	CONN_CLOSED
};

struct link_head {
	uv_loop_t *loop;
	uv_tcp_t listener;
	bool listening, closing;
	char run_id[LINK_RUN_ID_LEN + 1];
	uint8_t key[LINK_KEY_LEN];
	link_head_cb cb;
	void *ctx;
	unsigned auth_ms, idle_ms;
	bool plain; /* link_head_set_plain */
	link_conn *conns;
	size_t handles; /* open libuv handles: the listener, two per connection */
	size_t npending, nactive;
};

struct link_conn {
	uv_tcp_t tcp;
	uv_timer_t timer;
	link_head *h;
	link_conn *prev, *next;
	enum conn_state state;
	void *node; /* what joined returned */
	int closed_handles;
	uint64_t last_rx; /* uv_now */
	char peer[INET6_ADDRSTRLEN + 16];
	uint8_t nonce[NONCE_LEN];
	link_aead rx, tx;
	/* A DATA frame as it arrives (sealed), and opened. */
	uint8_t *sealed, *opened;
	size_t sealed_len, buf_cap;
	link_parser parser;
	uint8_t rbuf[HEAD_READ_BUF];
};

typedef struct conn_write {
	uv_write_t req;
	link_conn *c;
	bool close_after;
	uint8_t bytes[];
} conn_write;

static void head_maybe_free(link_head *h)
{
	if (h->closing && h->handles == 0) {
		sodium_memzero(h->key, sizeof(h->key));
		free(h);
	}
}

static void conn_handle_closed(uv_handle_t *hd)
{
	link_conn *c = hd->data;
	link_head *h = c->h;

	h->handles--;
	if (++c->closed_handles == 2) {
		aead_wipe(&c->rx);
		aead_wipe(&c->tx);
		free(c->sealed);
		free(c->opened);
		free(c);
		head_maybe_free(h);
	}
}

/* Closes c without a callback. */
static void conn_close(link_conn *c)
{
	link_head *h = c->h;

	if (c->state == CONN_CLOSED)
		return;
	if (c->state == CONN_CHALLENGED)
		h->npending--;
	else if (c->state == CONN_ACTIVE)
		h->nactive--;
	c->state = CONN_CLOSED;
	if (c->prev)
		c->prev->next = c->next;
	else
		h->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	uv_close((uv_handle_t *)&c->tcp, conn_handle_closed);
	uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
}

/*
 * Ends c for a reason: a peer that had not proved the key is refused
 * (cb->refused names it), an authenticated one has ended (cb->ended with
 * err); one that already sent END just goes.
 */
static void conn_fail(link_conn *c, int err, const char *why)
{
	link_head *h = c->h;
	enum conn_state was = c->state;

	if (was == CONN_CLOSED)
		return;
	conn_close(c);
	if (was == CONN_CHALLENGED && !h->closing && h->cb.refused)
		h->cb.refused(h->ctx, c->peer, why);
	else if (was == CONN_ACTIVE && h->cb.ended)
		h->cb.ended(h->ctx, c->node, err);
}

static void conn_write_cb(uv_write_t *req, int status)
{
	conn_write *w = (conn_write *)req;
	link_conn *c = w->c;

	if (status < 0)
		conn_fail(c, status, uv_strerror(status));
	else if (w->close_after)
		conn_close(c);
	free(w);
}

/* Sends one frame (payload copied). Returns 0 or a negative errno. */
static int conn_send(link_conn *c, unsigned type, const void *payload, uint32_t len,
		     bool close_after)
{
	conn_write *w = malloc(sizeof(*w) + LINK_HEADER_SIZE + len);
	uv_buf_t buf;
	int rc;

	if (!w)
		return -ENOMEM;
	w->c = c;
	w->close_after = close_after;
	frame_head(w->bytes, type, len);
	if (len)
		memcpy(w->bytes + LINK_HEADER_SIZE, payload, len);
	buf = uv_buf_init((char *)w->bytes, LINK_HEADER_SIZE + len);
	rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, conn_write_cb);
	if (rc < 0)
		free(w);
	return rc;
}

/* Sends one frame after the handshake, sealed. */
static int conn_send_sealed(link_conn *c, unsigned type, const void *payload, uint32_t len,
			    bool close_after)
{
	conn_write *w = malloc(sizeof(*w) + LINK_HEADER_SIZE + len + TAG_LEN);
	uv_buf_t buf;
	int rc;

	if (!w)
		return -ENOMEM;
	w->c = c;
	w->close_after = close_after;
	frame_head(w->bytes, type, len + TAG_LEN);
	aead_seal(&c->tx, w->bytes, payload, len, w->bytes + LINK_HEADER_SIZE);
	buf = uv_buf_init((char *)w->bytes, LINK_HEADER_SIZE + len + TAG_LEN);
	rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, conn_write_cb);
	if (rc < 0)
		free(w);
	return rc;
}

/* Tells a peer why it is refused (best effort: it is written at once or
 * not at all), then refuses it. */
static void conn_refuse(link_conn *c, const char *why, const char *tell)
{
	uint8_t f[LINK_HEADER_SIZE + REFUSE_MAX];
	size_t n = strlen(tell);
	uv_buf_t buf;

	if (n > REFUSE_MAX)
		n = REFUSE_MAX;
	frame_head(f, LINK_REFUSE, (uint32_t)n);
	memcpy(f + LINK_HEADER_SIZE, tell, n);
	buf = uv_buf_init((char *)f, (unsigned)(LINK_HEADER_SIZE + n));
	uv_try_write((uv_stream_t *)&c->tcp, &buf, 1);
	conn_fail(c, -EACCES, why);
}

/* A msgpack string of the info, copied NUL-terminated into *out (NULL when
 * absent). false: not a string, or one with a NUL inside. */
static bool info_str(const msgpack_object *o, char *buf, size_t cap, size_t *used, const char **out)
{
	if (o->type != MSGPACK_OBJECT_STR)
		return false;
	uint32_t n = o->via.str.size;
	if (memchr(o->via.str.ptr, '\0', n) || *used + n + 1 > cap)
		return false;
	memcpy(buf + *used, o->via.str.ptr, n);
	buf[*used + n] = '\0';
	*out = buf + *used;
	*used += n + 1;
	return true;
}

/* Decodes the info of a PROVE into *info, strings in buf. */
static bool info_decode(const uint8_t *data, size_t len, char *buf, size_t cap,
			link_node_info *info, unsigned *ciphers)
{
	msgpack_unpacked up;
	size_t off = 0, used = 0;
	bool ok;

	memset(info, 0, sizeof(*info));
	info->launcher_pid = -1;
	*ciphers = 0;
	msgpack_unpacked_init(&up);
	ok = msgpack_unpack_next(&up, (const char *)data, len, &off) == MSGPACK_UNPACK_SUCCESS &&
	     off == len && up.data.type == MSGPACK_OBJECT_MAP;
	for (uint32_t i = 0; ok && i < up.data.via.map.size; i++) {
		const msgpack_object *k = &up.data.via.map.ptr[i].key;
		const msgpack_object *v = &up.data.via.map.ptr[i].val;
		if (k->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			ok = false;
		else if (k->via.u64 == INFO_HOST)
			ok = info_str(v, buf, cap, &used, &info->host);
		else if (k->via.u64 == INFO_LAUNCHED_AS)
			ok = info_str(v, buf, cap, &used, &info->launched_as);
		else if (k->via.u64 == INFO_FALLBACK)
			ok = info_str(v, buf, cap, &used, &info->fallback);
		else if (k->via.u64 == INFO_LAUNCHER_PID &&
			 v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
			info->launcher_pid = v->via.u64 > INT32_MAX ? -1 : (int64_t)v->via.u64;
		else if (k->via.u64 == INFO_LAUNCHER_PID &&
			 v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
			info->launcher_pid = -1;
		else if (k->via.u64 == INFO_LAUNCHER_PID)
			ok = false;
		else if (k->via.u64 == INFO_CIPHERS && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
			*ciphers = (unsigned)v->via.u64;
		else if (k->via.u64 == INFO_CIPHERS)
			ok = false;
		/* Other keys: a later version's; ignored. */
	}
	msgpack_unpacked_destroy(&up);
	return ok && info->host && info->host[0];
}

static void conn_timer(uv_timer_t *t);

static int conn_prove(link_conn *c, const uint8_t *p, size_t len)
{
	link_head *h = c->h;
	uint8_t mac[MAC_LEN + 1], node_key[MAC_LEN], head_key[MAC_LEN];
	char strings[LINK_AUTH_MAX];
	const uint8_t *ibytes = p + 2 * NONCE_LEN;
	size_t ilen = len - 2 * NONCE_LEN;
	link_node_info info;
	unsigned ciphers;
	uint8_t cipher;

	handshake_mac(h->key, TAG_NODE, h->run_id, c->nonce, p, ibytes, ilen, NULL, 0, mac);
	if (crypto_verify_32(mac, p + NONCE_LEN) != 0) {
		conn_refuse(c, "did not prove the run's key (a wrong key, or another run's)",
			    "wrong key");
		return -1;
	}
	if (!info_decode(ibytes, ilen, strings, sizeof(strings), &info, &ciphers)) {
		conn_refuse(c, "proved the key but sent a malformed info", "malformed info");
		return -1;
	}
	ciphers &= ciphers_here();
	if (h->plain && ciphers & 1u << CIPHER_NONE)
		cipher = CIPHER_NONE;
	else if (ciphers & 1u << CIPHER_AES256GCM)
		cipher = CIPHER_AES256GCM;
	else if (ciphers & 1u << CIPHER_CHACHA20POLY1305)
		cipher = CIPHER_CHACHA20POLY1305;
	else
		ciphers = 0;
	if (!ciphers) {
		conn_refuse(c, "has no cipher in common with the head", "no cipher in common");
		return -1;
	}
	info.peer = c->peer;
	handshake_mac(h->key, TAG_HEAD, h->run_id, p, c->nonce, ibytes, ilen, &cipher, 1, mac);
	mac[MAC_LEN] = cipher;
	session_keys(h->key, h->run_id, c->nonce, p, ibytes, ilen, node_key, head_key);
	aead_init(&c->rx, cipher, node_key);
	aead_init(&c->tx, cipher, head_key);
	sodium_memzero(node_key, sizeof(node_key));
	sodium_memzero(head_key, sizeof(head_key));
	h->npending--;
	h->nactive++;
	c->state = CONN_ACTIVE;
	c->parser.allowed = 1u << LINK_DATA | 1u << LINK_PING | 1u << LINK_END;
	c->last_rx = uv_now(h->loop);
	unsigned tick = tick_ms(h->idle_ms);
	uv_timer_start(&c->timer, conn_timer, tick, tick);
	c->node = h->cb.joined ? h->cb.joined(h->ctx, &info) : NULL;
	if (c->state != CONN_ACTIVE)
		return -1;
	if (!c->node) {
		conn_close(c); /* the caller refused it, and says so itself */
		return -1;
	}
	int rc = conn_send(c, LINK_ACCEPT, mac, MAC_LEN + 1, false);
	if (rc < 0) {
		conn_fail(c, rc, uv_strerror(rc));
		return -1;
	}
	return 0;
}

/* A frame after the handshake that does not open: not the node's, or
 * changed on the way. */
static int conn_forged(link_conn *c)
{
	conn_fail(c, -EBADMSG, "sent a frame that does not authenticate (changed on the way?)");
	return -1;
}

/* DATA arrives in slices: gathered, opened whole, given to cb->data. */
static int conn_data(link_conn *c, const uint8_t *p, size_t len, bool last)
{
	link_head *h = c->h;
	int rc = 0;

	/* As large as the frames this node sends (the parser bounds the
	 * length by LINK_DATA_MAX), not larger. */
	if (c->buf_cap < c->parser.len) {
		free(c->sealed);
		free(c->opened);
		c->sealed = malloc(c->parser.len);
		c->opened = malloc(c->parser.len);
		c->buf_cap = c->parser.len;
		if (!c->sealed || !c->opened) {
			c->buf_cap = 0;
			conn_fail(c, -ENOMEM, "out of memory");
			return -1;
		}
	}
	memcpy(c->sealed + c->sealed_len, p, len);
	c->sealed_len += len;
	if (!last)
		return 0;
	size_t n = c->sealed_len;
	c->sealed_len = 0;
	if (aead_open(&c->rx, LINK_DATA, c->sealed, n, c->opened) < 0)
		return conn_forged(c);
	if (n > TAG_LEN && h->cb.data)
		rc = h->cb.data(h->ctx, c->node, c->opened, n - TAG_LEN);
	if (rc < 0)
		conn_fail(c, rc, "the data callback refused it");
	return rc < 0 || c->state == CONN_CLOSED ? -1 : 0;
}

static int conn_frame(void *arg, unsigned type, const uint8_t *p, size_t len, bool last)
{
	link_conn *c = arg;
	link_head *h = c->h;
	int rc = 0;

	switch (type) {
	case LINK_PROVE:
		return conn_prove(c, p, len);
	case LINK_DATA:
		return conn_data(c, p, len, last);
	case LINK_PING: {
		/* Answered at once, before anything else is read: the round
		 * trip is the clock's error bound. */
		uint8_t pong[16];
		if (aead_open(&c->rx, LINK_PING, p, len, pong) < 0)
			return conn_forged(c);
		put_le64(pong + 8, (uint64_t)mono_ns());
		rc = conn_send_sealed(c, LINK_PONG, pong, sizeof(pong), false);
		if (rc < 0)
			conn_fail(c, rc, uv_strerror(rc));
		break;
	}
	case LINK_END:
		if (aead_open(&c->rx, LINK_END, p, len, (uint8_t[1]){0}) < 0)
			return conn_forged(c);
		h->nactive--;
		c->state = CONN_ENDED;
		c->parser.allowed = 0; /* nothing may follow END */
		if (h->cb.ended)
			h->cb.ended(h->ctx, c->node, 0);
		if (c->state != CONN_ENDED)
			return -1;
		rc = conn_send_sealed(c, LINK_END_ACK, NULL, 0, true);
		if (rc < 0)
			conn_close(c);
		break;
	}
	(void)last;
	return rc < 0 || c->state == CONN_CLOSED ? -1 : 0;
}

static void conn_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *buf)
{
	link_conn *c = hd->data;

	(void)suggested;
	*buf = uv_buf_init((char *)c->rbuf, sizeof(c->rbuf));
}

static void conn_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	link_conn *c = s->data;
	char why[128];
	int rc;

	if (nread == 0 || c->state == CONN_CLOSED)
		return;
	if (nread < 0) {
		if (c->state == CONN_ENDED) {
			conn_close(c);
			return;
		}
		snprintf(why, sizeof(why), "%s",
			 nread == UV_EOF ? "closed the connection" : uv_strerror((int)nread));
		conn_fail(c, nread == UV_EOF ? -ECONNRESET : (int)nread, why);
		return;
	}
	c->last_rx = uv_now(c->h->loop);
	rc = link_parse(&c->parser, (const uint8_t *)buf->base, (size_t)nread, conn_frame, c);
	if (rc < 0 && c->state != CONN_CLOSED) {
		snprintf(why, sizeof(why), "sent %s", link_strerror(rc));
		if (c->state == CONN_CHALLENGED)
			conn_refuse(c, why, "protocol error");
		else
			conn_fail(c, -EPROTO, why);
	}
}

static void conn_timer(uv_timer_t *t)
{
	link_conn *c = t->data;
	link_head *h = c->h;
	char why[96];

	if (c->state == CONN_CHALLENGED) {
		snprintf(why, sizeof(why), "did not prove the run's key within %u ms", h->auth_ms);
		conn_refuse(c, why, "too slow");
		return;
	}
	if (uv_now(h->loop) - c->last_rx < h->idle_ms)
		return;
	/* The loop may have been busy while the node's bytes waited. */
	if (unread_bytes(&c->tcp)) {
		c->last_rx = uv_now(h->loop);
		return;
	}
	if (c->state == CONN_ENDED) {
		conn_close(c); /* the END_ACK never left */
		return;
	}
	snprintf(why, sizeof(why), "silent for %u ms", h->idle_ms);
	conn_fail(c, -ETIMEDOUT, why);
}

static void on_connection(uv_stream_t *server, int status)
{
	link_head *h = server->data;
	struct sockaddr_storage ss;
	int len = sizeof(ss);
	uint8_t challenge[CHALLENGE_LEN];
	link_conn *c;

	if (status < 0 || h->closing)
		return;
	c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->h = h;
	uv_tcp_init(h->loop, &c->tcp);
	uv_timer_init(h->loop, &c->timer);
	c->tcp.data = c->timer.data = c;
	h->handles += 2;
	h->npending++;
	c->state = CONN_CHALLENGED;
	c->next = h->conns;
	if (h->conns)
		h->conns->prev = c;
	h->conns = c;
	if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
		conn_close(c);
		return;
	}
	if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0)
		addr_text(&ss, c->peer, sizeof(c->peer));
	else
		snprintf(c->peer, sizeof(c->peer), "(unknown address)");
	if (h->npending > HEAD_MAX_PENDING) {
		conn_refuse(c, "one connection too many waiting to authenticate", "busy");
		return;
	}
	tcp_tune(&c->tcp, true);
	c->parser.allowed = 1u << LINK_PROVE;
	randombytes_buf(c->nonce, sizeof(c->nonce));
	memcpy(challenge, h->run_id, LINK_RUN_ID_LEN);
	memcpy(challenge + LINK_RUN_ID_LEN, c->nonce, NONCE_LEN);
	c->last_rx = uv_now(h->loop);
	if (conn_send(c, LINK_CHALLENGE, challenge, sizeof(challenge), false) < 0 ||
	    uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_read) < 0) {
		conn_close(c);
		return;
	}
	uv_timer_start(&c->timer, conn_timer, h->auth_ms, 0);
}

/* Binds the listener to every address: IPv6 and, through it, IPv4, or
 * IPv4 alone on a host without IPv6. */
static int head_bind_any(link_head *h, int port)
{
	struct sockaddr_in6 a6;
	struct sockaddr_in a4;
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd >= 0) {
		close(fd);
		uv_ip6_addr("::", port, &a6);
		return uv_tcp_bind(&h->listener, (const struct sockaddr *)&a6, 0);
	}
	uv_ip4_addr("0.0.0.0", port, &a4);
	return uv_tcp_bind(&h->listener, (const struct sockaddr *)&a4, 0);
}

static int head_bind(link_head *h, const char *addr)
{
	char host[256], port[8];
	uv_getaddrinfo_t req;
	struct addrinfo hints;
	int rc;

	if (!addr)
		return head_bind_any(h, 0);
	rc = addr_split(addr, host, sizeof(host), port, sizeof(port));
	if (rc < 0)
		return rc;
	if (!host[0] || strcmp(host, "*") == 0)
		return head_bind_any(h, atoi(port));
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	/* Without a callback, uv_getaddrinfo resolves at once. */
	rc = uv_getaddrinfo(h->loop, &req, NULL, host, port, &hints);
	if (rc < 0)
		return rc;
	rc = req.addrinfo ? uv_tcp_bind(&h->listener, req.addrinfo->ai_addr, 0) : UV_EAI_NONAME;
	uv_freeaddrinfo(req.addrinfo);
	return rc;
}

static void listener_closed(uv_handle_t *hd)
{
	link_head *h = hd->data;

	h->handles--;
	head_maybe_free(h);
}

int link_head_start(link_head **head, uv_loop_t *loop, const char *addr, const char *run_id,
		    const uint8_t key[LINK_KEY_LEN], const link_head_cb *cb, void *ctx, int *port)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss), rc;
	link_head *h;

	*head = NULL;
	if (sodium_init() < 0)
		return -EIO;
	if (!is_run_id(run_id))
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->loop = loop;
	memcpy(h->run_id, run_id, LINK_RUN_ID_LEN + 1);
	memcpy(h->key, key, LINK_KEY_LEN);
	h->cb = *cb;
	h->ctx = ctx;
	h->auth_ms = LINK_AUTH_MS;
	h->idle_ms = LINK_IDLE_MS;
	rc = uv_tcp_init(loop, &h->listener);
	if (rc < 0) {
		free(h);
		return rc;
	}
	h->listener.data = h;
	h->handles = 1;
	h->listening = true;
	rc = head_bind(h, addr);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&h->listener, 128, on_connection);
	if (rc == 0)
		rc = uv_tcp_getsockname(&h->listener, (struct sockaddr *)&ss, &len);
	if (rc < 0) {
		link_head_close(h);
		return rc;
	}
	if (port)
		*port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						       : ((struct sockaddr_in *)&ss)->sin_port);
	*head = h;
	return 0;
}

size_t link_head_active(const link_head *h)
{
	return h ? h->nactive : 0;
}

void link_head_stop_listening(link_head *h)
{
	if (!h || !h->listening)
		return;
	h->listening = false;
	uv_close((uv_handle_t *)&h->listener, listener_closed);
}

void link_head_close(link_head *h)
{
	if (!h || h->closing)
		return;
	h->closing = true;
	link_head_stop_listening(h);
	while (h->conns)
		conn_fail(h->conns, -ECANCELED, "the head closed");
	head_maybe_free(h);
}

void link_head_set_plain(link_head *h, bool plain)
{
	h->plain = plain;
}

void link_head_set_timeouts(link_head *h, unsigned auth_ms, unsigned idle_ms)
{
	if (auth_ms)
		h->auth_ms = auth_ms;
	if (idle_ms)
		h->idle_ms = idle_ms;
}

/* ---- the node ----------------------------------------------------------- */

enum node_state {
	NODE_RESOLVING,
	NODE_CONNECTING,
	NODE_CHALLENGE_WAIT, /* connected, waits for CHALLENGE */
	NODE_ACCEPT_WAIT,    /* sent PROVE */
	NODE_ACTIVE,
	NODE_ENDING, /* sent END */
	NODE_DONE    /* finished or failed; waits for link_node_close */
};

struct link_node {
	uv_loop_t *loop;
	uv_tcp_t *tcp; /* one per address tried; NULL once closed */
	uv_timer_t timer;
	uv_prepare_t flusher; /* writes what was gathered before the loop waits */
	uv_getaddrinfo_t gai;
	uv_connect_t connect;
	bool gai_pending, closing;
	int handles; /* open libuv handles */
	enum node_state state;
	link_node_cb cb;
	void *ctx;
	char head[300]; /* as given, for messages */
	char host[256], port[8];
	struct addrinfo *ai, *ai_next;
	unsigned auth_ms, idle_ms;
	uint8_t info[LINK_AUTH_MAX - NONCE_LEN - MAC_LEN];
	size_t info_len;
	char run_id[LINK_RUN_ID_LEN + 1];
	char expect_run_id[LINK_RUN_ID_LEN + 1]; /* empty: any */
	uint8_t key[LINK_KEY_LEN];
	uint8_t head_nonce[NONCE_LEN], nonce[NONCE_LEN];
	link_aead rx, tx;
	link_parser parser;
	uint8_t rbuf[4096];
	/* DATA gathered (and held before authentication and during a
	 * clock burst). */
	uint8_t *pend;
	size_t pend_len, pend_cap;
	bool finish_wanted, notify_writable;
	/* The clock: the ping in flight and the burst's best round trip. */
	bool burst, ping_out, ping_in_burst;
	int burst_left;
	int64_t ping_t1, best_rtt;
	uint64_t ping_sent_ms, last_rx;
	model_clock_sample best;
};

typedef struct node_write {
	uv_write_t req;
	link_node *l;
	uint8_t bytes[];
} node_write;

static void node_maybe_free(link_node *l)
{
	if (!l->closing || l->handles > 0 || l->gai_pending)
		return;
	uv_freeaddrinfo(l->ai);
	sodium_memzero(l->key, sizeof(l->key));
	aead_wipe(&l->rx);
	aead_wipe(&l->tx);
	free(l->pend);
	free(l);
}

static void node_handle_closed(uv_handle_t *hd)
{
	link_node *l = hd->data;

	if (hd != (uv_handle_t *)&l->timer && hd != (uv_handle_t *)&l->flusher)
		free(hd);
	l->handles--;
	node_maybe_free(l);
}

static void node_close_tcp(link_node *l)
{
	if (!l->tcp)
		return;
	uv_close((uv_handle_t *)l->tcp, node_handle_closed);
	l->tcp = NULL;
}

/* The link is done: before authentication cb->connected says why, after it
 * cb->done. Nothing follows. */
static void node_fail(link_node *l, int err, const char *why)
{
	enum node_state was = l->state;

	if (was == NODE_DONE)
		return;
	l->state = NODE_DONE;
	uv_timer_stop(&l->timer);
	node_close_tcp(l);
	if (l->closing)
		return;
	if (was < NODE_ACTIVE) {
		if (l->cb.connected)
			l->cb.connected(l->ctx, err, why);
	} else if (l->cb.done) {
		l->cb.done(l->ctx, err, why);
	}
}

static void node_failf(link_node *l, int err, const char *fmt, const char *arg)
{
	char why[512];

	snprintf(why, sizeof(why), fmt, l->head, arg);
	node_fail(l, err, why);
}

size_t link_node_queued(const link_node *l)
{
	return (l->tcp ? uv_stream_get_write_queue_size((const uv_stream_t *)l->tcp) : 0) +
	       l->pend_len;
}

static void node_write_cb(uv_write_t *req, int status)
{
	node_write *w = (node_write *)req;
	link_node *l = w->l;

	free(w);
	if (status < 0) {
		node_failf(l, status, "lost the connection to %s: %s", uv_strerror(status));
		return;
	}
	if (l->notify_writable && l->state == NODE_ACTIVE && link_node_queued(l) < LINK_LOW_WATER) {
		l->notify_writable = false;
		if (l->cb.writable)
			l->cb.writable(l->ctx);
	}
}

/* Writes a small frame after the handshake (PING, END), sealed. */
static int node_send_small(link_node *l, unsigned type, const void *payload, size_t len)
{
	node_write *w = malloc(sizeof(*w) + LINK_HEADER_SIZE + len + TAG_LEN);
	uv_buf_t buf;
	int rc;

	if (!w)
		return -ENOMEM;
	w->l = l;
	frame_head(w->bytes, type, (uint32_t)(len + TAG_LEN));
	aead_seal(&l->tx, w->bytes, payload, len, w->bytes + LINK_HEADER_SIZE);
	buf = uv_buf_init((char *)w->bytes, (unsigned)(LINK_HEADER_SIZE + len + TAG_LEN));
	rc = uv_write(&w->req, (uv_stream_t *)l->tcp, &buf, 1, node_write_cb);
	if (rc < 0)
		free(w);
	return rc;
}

/*
 * Writes data as sealed DATA frames of at most NODE_FRAME_MAX bytes, in
 * one write (one block: each frame's header, then its sealed bytes).
 */
static int node_send_data(link_node *l, const uint8_t *data, size_t len)
{
	size_t nframes = (len + NODE_FRAME_MAX - 1) / NODE_FRAME_MAX;
	size_t size = nframes * (LINK_HEADER_SIZE + TAG_LEN) + len;
	node_write *w = malloc(sizeof(*w) + size);
	uv_buf_t buf;
	int rc;

	if (!w)
		return -ENOMEM;
	w->l = l;
	uint8_t *out = w->bytes;
	for (size_t off = 0; off < len; off += NODE_FRAME_MAX) {
		size_t n = len - off < NODE_FRAME_MAX ? len - off : NODE_FRAME_MAX;
		frame_head(out, LINK_DATA, (uint32_t)(n + TAG_LEN));
		aead_seal(&l->tx, out, data + off, n, out + LINK_HEADER_SIZE);
		out += LINK_HEADER_SIZE + n + TAG_LEN;
	}
	buf = uv_buf_init((char *)w->bytes, (unsigned)size);
	rc = uv_write(&w->req, (uv_stream_t *)l->tcp, &buf, 1, node_write_cb);
	if (rc < 0)
		free(w);
	return rc;
}

static int node_send_end(link_node *l)
{
	int rc = node_send_small(l, LINK_END, NULL, 0);

	if (rc == 0)
		l->state = NODE_ENDING;
	return rc;
}

/* Writes what was gathered or held. */
static int node_flush_data(link_node *l)
{
	int rc = 0;

	if (l->pend_len > 0) {
		rc = node_send_data(l, l->pend, l->pend_len);
		l->pend_len = 0;
		/* What a burst or the handshake held can be large: give it
		 * back, keep a gathering buffer's worth. */
		if (l->pend_cap > 4 * NODE_FRAME_MAX) {
			free(l->pend);
			l->pend = NULL;
			l->pend_cap = 0;
		}
	}
	return rc;
}

/* Writes what was gathered or held, then END if the caller finished
 * meanwhile. */
static int node_flush(link_node *l)
{
	int rc = node_flush_data(l);

	if (rc == 0 && l->finish_wanted && l->state == NODE_ACTIVE)
		rc = node_send_end(l);
	if (rc < 0)
		node_failf(l, rc, "cannot write to %s: %s", uv_strerror(rc));
	return rc;
}

static int node_send_ping(link_node *l, bool in_burst)
{
	uint8_t t1[8];
	int rc;

	l->ping_t1 = mono_ns();
	put_le64(t1, (uint64_t)l->ping_t1);
	l->ping_out = true;
	l->ping_in_burst = in_burst;
	l->ping_sent_ms = uv_now(l->loop);
	rc = node_send_small(l, LINK_PING, t1, sizeof(t1));
	if (rc < 0)
		node_failf(l, rc, "cannot write to %s: %s", uv_strerror(rc));
	return rc;
}

/*
 * The burst is over: what was held during it is written first, then the
 * sample goes to cb->clock, so that whatever the callback sends (the
 * records of the sample, the rest of the stream, END) comes after the
 * bytes sent before it, as a model stream must.
 */
static void node_end_burst(link_node *l)
{
	l->burst = false;
	if (l->state == NODE_ACTIVE && node_flush(l) < 0)
		return;
	if (l->best_rtt != INT64_MAX && l->cb.clock) {
		model_clock_sample s = l->best;
		l->cb.clock(l->ctx, &s);
	}
	if (l->state == NODE_ACTIVE)
		node_flush(l);
}

static void node_pong(link_node *l, const uint8_t *p)
{
	int64_t t1 = (int64_t)get_le64(p), t2 = (int64_t)get_le64(p + 8), t4 = mono_ns();

	/* A pong of a ping that an earlier one replaced says only that the
	 * head is there. */
	if (!l->ping_out || t1 != l->ping_t1)
		return;
	l->ping_out = false;
	if (!l->ping_in_burst || !l->burst)
		return;
	int64_t rtt = t4 - t1, mid = t1 + rtt / 2;
	if (rtt >= 0 && rtt < l->best_rtt) {
		l->best_rtt = rtt;
		l->best.node_ns = mid;
		l->best.offset_ns = t2 - mid;
		l->best.err_ns = (rtt + 1) / 2;
	}
	if (--l->burst_left > 0)
		node_send_ping(l, true);
	else
		node_end_burst(l);
}

static void node_tick(uv_timer_t *t);

static int node_challenge(link_node *l, const uint8_t *p)
{
	char dir[PATH_MAX], why[PATH_MAX + 160];
	uint8_t *prove;
	const char *reason;
	size_t len = 2 * NONCE_LEN + l->info_len;
	uv_buf_t buf;
	node_write *w;
	int rc;

	memcpy(l->run_id, p, LINK_RUN_ID_LEN);
	l->run_id[LINK_RUN_ID_LEN] = '\0';
	memcpy(l->head_nonce, p + LINK_RUN_ID_LEN, NONCE_LEN);
	if (!is_run_id(l->run_id)) {
		node_failf(l, -EPROTO, "%s sent %s", "a malformed challenge");
		return -1;
	}
	/* Another run of this user's would take the node's part (its key
	 * is in the same directory). */
	if (l->expect_run_id[0] && strcmp(l->run_id, l->expect_run_id) != 0) {
		snprintf(why, sizeof(why), "another run (%s, not %s)", l->run_id, l->expect_run_id);
		node_failf(l, -EACCES, "%s is the head of %s", why);
		return -1;
	}
	rc = link_key_dir(dir, sizeof(dir));
	if (rc < 0) {
		node_failf(l, rc, "cannot find the run's key for %s: %s",
			   "no $FORKTRACE_KEY_DIR and no $HOME");
		return -1;
	}
	rc = link_key_read(dir, l->run_id, l->key, &reason);
	if (rc < 0) {
		snprintf(why, sizeof(why), "the run's key %s/%s.key: %s", dir, l->run_id, reason);
		node_failf(l, rc, "cannot join %s: %s", why);
		return -1;
	}
	randombytes_buf(l->nonce, sizeof(l->nonce));
	w = malloc(sizeof(*w) + LINK_HEADER_SIZE + len);
	if (!w) {
		node_failf(l, -ENOMEM, "cannot join %s: %s", "out of memory");
		return -1;
	}
	w->l = l;
	frame_head(w->bytes, LINK_PROVE, (uint32_t)len);
	prove = w->bytes + LINK_HEADER_SIZE;
	memcpy(prove, l->nonce, NONCE_LEN);
	handshake_mac(l->key, TAG_NODE, l->run_id, l->head_nonce, l->nonce, l->info, l->info_len,
		      NULL, 0, prove + NONCE_LEN);
	memcpy(prove + NONCE_LEN + MAC_LEN, l->info, l->info_len);
	buf = uv_buf_init((char *)w->bytes, (unsigned)(LINK_HEADER_SIZE + len));
	rc = uv_write(&w->req, (uv_stream_t *)l->tcp, &buf, 1, node_write_cb);
	if (rc < 0) {
		free(w);
		node_failf(l, rc, "cannot write to %s: %s", uv_strerror(rc));
		return -1;
	}
	l->state = NODE_ACCEPT_WAIT;
	l->parser.allowed = 1u << LINK_ACCEPT | 1u << LINK_REFUSE;
	return 0;
}

static int node_accept(link_node *l, const uint8_t *p)
{
	uint8_t mac[MAC_LEN], node_key[MAC_LEN], head_key[MAC_LEN];
	uint8_t cipher = p[MAC_LEN];
	unsigned tick;

	handshake_mac(l->key, TAG_HEAD, l->run_id, l->nonce, l->head_nonce, l->info, l->info_len,
		      &cipher, 1, mac);
	if (crypto_verify_32(mac, p) != 0) {
		node_failf(l, -EACCES, "%s did not prove the run's key: %s",
			   "not the head of this run");
		return -1;
	}
	if (cipher >= 32 || !(ciphers_here() >> cipher & 1u)) {
		node_failf(l, -EPROTO, "%s picked %s", "a cipher this node does not have");
		return -1;
	}
	session_keys(l->key, l->run_id, l->head_nonce, l->nonce, l->info, l->info_len, node_key,
		     head_key);
	aead_init(&l->tx, cipher, node_key);
	aead_init(&l->rx, cipher, head_key);
	sodium_memzero(node_key, sizeof(node_key));
	sodium_memzero(head_key, sizeof(head_key));
	l->state = NODE_ACTIVE;
	l->parser.allowed = 1u << LINK_PONG | 1u << LINK_END_ACK;
	l->last_rx = uv_now(l->loop);
	tick = tick_ms(l->idle_ms);
	uv_timer_start(&l->timer, node_tick, tick, tick);
	/* What was queued before comes first. */
	if (node_flush(l) < 0)
		return -1;
	if (l->cb.connected)
		l->cb.connected(l->ctx, 0, NULL);
	return l->state == NODE_DONE ? -1 : 0;
}

static int node_forged(link_node *l)
{
	node_failf(l, -EBADMSG, "%s sent %s", "a frame that does not authenticate");
	return -1;
}

static int node_frame(void *arg, unsigned type, const uint8_t *p, size_t len, bool last)
{
	link_node *l = arg;
	char text[REFUSE_MAX + 1];
	uint8_t opened[16];

	(void)last;
	switch (type) {
	case LINK_CHALLENGE:
		return node_challenge(l, p);
	case LINK_REFUSE:
		/* Only what prints safely of what the head says. */
		for (size_t i = 0; i < len; i++)
			text[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
		text[len] = '\0';
		node_failf(l, -EACCES, "%s refused this node: %s", text);
		return -1;
	case LINK_ACCEPT:
		return node_accept(l, p);
	case LINK_PONG:
		if (aead_open(&l->rx, LINK_PONG, p, len, opened) < 0)
			return node_forged(l);
		node_pong(l, opened);
		break;
	case LINK_END_ACK:
		if (aead_open(&l->rx, LINK_END_ACK, p, len, opened) < 0)
			return node_forged(l);
		l->state = NODE_DONE;
		uv_timer_stop(&l->timer);
		node_close_tcp(l);
		if (l->cb.done)
			l->cb.done(l->ctx, 0, NULL);
		return -1;
	}
	return l->state == NODE_DONE ? -1 : 0;
}

static void node_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *buf)
{
	link_node *l = hd->data;

	(void)suggested;
	*buf = uv_buf_init((char *)l->rbuf, sizeof(l->rbuf));
}

static void node_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	link_node *l = s->data;
	char why[160];
	int rc;

	if (nread == 0 || l->state == NODE_DONE)
		return;
	if (nread < 0) {
		if (nread != UV_EOF)
			node_failf(l, (int)nread, "lost the connection to %s: %s",
				   uv_strerror((int)nread));
		else if (l->state < NODE_ACTIVE)
			node_failf(l, -ECONNRESET, "%s closed the connection: %s",
				   "not a forktrace head, or one that refused this node");
		else
			node_failf(l, -ECONNRESET, "%s closed the connection%s", "");
		return;
	}
	l->last_rx = uv_now(l->loop);
	rc = link_parse(&l->parser, (const uint8_t *)buf->base, (size_t)nread, node_frame, l);
	if (rc < 0 && l->state != NODE_DONE) {
		snprintf(why, sizeof(why), "sent %s", link_strerror(rc));
		node_failf(l, -EPROTO, "%s %s", why);
	}
}

static void node_tick(uv_timer_t *t)
{
	link_node *l = t->data;
	uint64_t now = uv_now(l->loop), tick = tick_ms(l->idle_ms);
	char why[64];

	if (now - l->last_rx >= l->idle_ms && !unread_bytes(l->tcp)) {
		snprintf(why, sizeof(why), "silent for %u ms", l->idle_ms);
		node_failf(l, -ETIMEDOUT, "%s was %s", why);
		return;
	}
	/* A burst whose pong is this late ends with what it has. */
	if (l->burst && l->ping_out && now - l->ping_sent_ms >= tick) {
		l->ping_out = false;
		node_end_burst(l);
		return;
	}
	/* The heartbeat: the head answers it, so it is never silent. */
	if (l->state == NODE_ACTIVE && !l->ping_out)
		node_send_ping(l, false);
}

/* Before authentication: the whole of connecting and proving has a deadline. */
static void node_deadline(uv_timer_t *t)
{
	link_node *l = t->data;
	char why[64];

	snprintf(why, sizeof(why), "no answer within %u ms", l->auth_ms);
	node_failf(l, -ETIMEDOUT, "cannot join %s: %s", why);
}

static void node_connect_next(link_node *l);

static void node_connected(uv_connect_t *req, int status)
{
	link_node *l = req->data;

	if (l->closing || l->state != NODE_CONNECTING)
		return;
	if (status < 0) {
		node_close_tcp(l);
		if (l->ai_next) {
			node_connect_next(l);
			return;
		}
		node_failf(l, status, "cannot connect to %s: %s", uv_strerror(status));
		return;
	}
	tcp_tune(l->tcp, false);
	l->state = NODE_CHALLENGE_WAIT;
	l->parser.allowed = 1u << LINK_CHALLENGE;
	status = uv_read_start((uv_stream_t *)l->tcp, node_alloc, node_read);
	if (status < 0)
		node_failf(l, status, "cannot read from %s: %s", uv_strerror(status));
}

/* Tries the next address the head's name resolved to. */
static void node_connect_next(link_node *l)
{
	const struct addrinfo *ai = l->ai_next;
	int rc;

	l->ai_next = ai->ai_next;
	l->tcp = malloc(sizeof(*l->tcp));
	if (!l->tcp) {
		node_failf(l, -ENOMEM, "cannot connect to %s: %s", "out of memory");
		return;
	}
	uv_tcp_init(l->loop, l->tcp);
	l->tcp->data = l;
	l->handles++;
	l->connect.data = l;
	rc = uv_tcp_connect(&l->connect, l->tcp, ai->ai_addr, node_connected);
	if (rc < 0) {
		node_close_tcp(l);
		if (l->ai_next)
			node_connect_next(l);
		else
			node_failf(l, rc, "cannot connect to %s: %s", uv_strerror(rc));
	}
}

static void node_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
	link_node *l = req->data;

	l->gai_pending = false;
	l->ai = res;
	l->ai_next = res;
	if (l->closing) {
		node_maybe_free(l);
		return;
	}
	if (status < 0 || !res) {
		node_failf(l, status < 0 ? status : UV_EAI_NONAME, "cannot resolve %s: %s",
			   uv_strerror(status < 0 ? status : UV_EAI_NONAME));
		return;
	}
	l->state = NODE_CONNECTING;
	node_connect_next(l);
}

/* The node's info as a msgpack map. */
static int info_encode(link_node *l, const link_node_info *info)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	const char *strs[3] = {info->host, info->launched_as, info->fallback};
	const int keys[3] = {INFO_HOST, INFO_LAUNCHED_AS, INFO_FALLBACK};
	unsigned n = 2;
	int rc = 0;

	for (int i = 0; i < 3; i++)
		n += strs[i] != NULL;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, n);
	msgpack_pack_uint8(&pk, INFO_LAUNCHER_PID);
	msgpack_pack_int64(&pk, info->launcher_pid);
	msgpack_pack_uint8(&pk, INFO_CIPHERS);
	msgpack_pack_unsigned_int(&pk, ciphers_here());
	for (int i = 0; i < 3; i++) {
		if (!strs[i])
			continue;
		size_t len = strlen(strs[i]);
		msgpack_pack_uint8(&pk, (uint8_t)keys[i]);
		msgpack_pack_str(&pk, len);
		msgpack_pack_str_body(&pk, strs[i], len);
	}
	if (sb.size > sizeof(l->info))
		rc = -E2BIG;
	else
		memcpy(l->info, sb.data, sb.size);
	l->info_len = sb.size;
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

int link_node_start(link_node **node, uv_loop_t *loop, const char *head, const link_node_info *info,
		    const link_node_cb *cb, void *ctx)
{
	struct addrinfo hints;
	link_node *l;
	int rc;

	*node = NULL;
	if (sodium_init() < 0)
		return -EIO;
	if (!head || !info->host || !info->host[0] || (info->run_id && !is_run_id(info->run_id)))
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->loop = loop;
	l->cb = *cb;
	l->ctx = ctx;
	l->auth_ms = LINK_AUTH_MS;
	l->idle_ms = LINK_IDLE_MS;
	l->best_rtt = INT64_MAX;
	snprintf(l->head, sizeof(l->head), "%s", head);
	if (info->run_id)
		memcpy(l->expect_run_id, info->run_id, LINK_RUN_ID_LEN + 1);
	rc = addr_split(head, l->host, sizeof(l->host), l->port, sizeof(l->port));
	if (rc == 0 && (!l->host[0] || atoi(l->port) == 0))
		rc = -EINVAL;
	if (rc == 0)
		rc = info_encode(l, info);
	if (rc < 0) {
		free(l);
		return rc;
	}
	uv_timer_init(loop, &l->timer);
	uv_prepare_init(loop, &l->flusher);
	l->timer.data = l->flusher.data = l;
	l->handles = 2;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	l->gai.data = l;
	rc = uv_getaddrinfo(loop, &l->gai, node_resolved, l->host, l->port, &hints);
	if (rc < 0) {
		link_node_close(l);
		return rc;
	}
	l->gai_pending = true;
	uv_timer_start(&l->timer, node_deadline, l->auth_ms, 0);
	*node = l;
	return 0;
}

static void node_flusher(uv_prepare_t *p)
{
	link_node *l = p->data;

	uv_prepare_stop(p);
	if (l->state == NODE_ACTIVE && !l->burst && node_flush_data(l) < 0)
		node_failf(l, -EIO, "cannot write to %s: %s", "the write failed");
}

int link_node_send(link_node *l, const void *data, size_t len)
{
	bool hold;
	int rc;

	if (l->state == NODE_DONE || l->state == NODE_ENDING || l->finish_wanted)
		return -EPIPE;
	if (len == 0)
		return 0;
	hold = l->state != NODE_ACTIVE || l->burst;
	if (!hold && len >= NODE_GATHER_MAX) {
		rc = node_flush_data(l);
		if (rc == 0)
			rc = node_send_data(l, data, len);
		if (rc < 0)
			return rc;
	} else {
		if (l->pend_len + len > l->pend_cap) {
			size_t cap = l->pend_cap ? l->pend_cap : 64 * 1024;
			while (cap < l->pend_len + len)
				cap *= 2;
			uint8_t *p = realloc(l->pend, cap);
			if (!p)
				return -ENOMEM;
			l->pend = p;
			l->pend_cap = cap;
		}
		memcpy(l->pend + l->pend_len, data, len);
		l->pend_len += len;
		if (!hold && l->pend_len >= NODE_FRAME_MAX) {
			rc = node_flush_data(l);
			if (rc < 0)
				return rc;
		} else if (!hold) {
			uv_prepare_start(&l->flusher, node_flusher);
		}
	}
	if (link_node_queued(l) >= LINK_LOW_WATER)
		l->notify_writable = true;
	return 0;
}

int link_node_clock_burst(link_node *l)
{
	if (l->state != NODE_ACTIVE || l->finish_wanted)
		return -ENOTCONN;
	if (l->burst)
		return 0;
	/* DATA waits meanwhile, so that the pings do not queue behind it. */
	l->burst = true;
	l->burst_left = LINK_BURST;
	l->best_rtt = INT64_MAX;
	return node_send_ping(l, true);
}

int link_node_finish(link_node *l)
{
	if (l->state == NODE_DONE)
		return -EPIPE;
	if (l->finish_wanted)
		return 0;
	l->finish_wanted = true;
	if (l->state == NODE_ACTIVE && !l->burst)
		return node_flush(l);
	return 0;
}

void link_node_close(link_node *l)
{
	if (!l || l->closing)
		return;
	l->closing = true;
	l->state = NODE_DONE;
	node_close_tcp(l);
	uv_close((uv_handle_t *)&l->timer, node_handle_closed);
	uv_close((uv_handle_t *)&l->flusher, node_handle_closed);
	if (l->gai_pending)
		uv_cancel((uv_req_t *)&l->gai);
	node_maybe_free(l);
}

void link_node_set_timeouts(link_node *l, unsigned auth_ms, unsigned idle_ms)
{
	if (auth_ms)
		l->auth_ms = auth_ms;
	if (idle_ms)
		l->idle_ms = idle_ms;
	if (l->state < NODE_ACTIVE && auth_ms)
		uv_timer_start(&l->timer, node_deadline, l->auth_ms, 0);
	else if (l->state == NODE_ACTIVE || l->state == NODE_ENDING) {
		unsigned tick = tick_ms(l->idle_ms);
		uv_timer_start(&l->timer, node_tick, tick, tick);
	}
}

const char *link_node_run_id(const link_node *l)
{
	return l && is_run_id(l->run_id) ? l->run_id : NULL;
}
