/* Adding, listing and revoking tokens: see tokens.h.
 *
 * The file is never edited in place: the new contents go to a temporary
 * file beside it, with the old file's owner and mode (root:roombox 0640 in
 * the package), which is synced and renamed over it.  roombox-fcgi thus
 * reads either the old file or the new one, never half of one, and sees a
 * new inode, which its stat() check notices at once.  Two roomboxctl runs
 * at once are serialised by a lock on the directory.
 *
 * A token is shown once, when it is made; afterwards only its fingerprint
 * (the first 12 hex digits of its SHA-256), which is enough to tell tokens
 * apart and to revoke one, and useless to authenticate with. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sha256.h"
#include "tokens.h"

#define TOKENS_FILE_MAX (1u << 20)   /* as fcgi-app/http/auth.c */
#define TOKEN_BYTES 32               /* as debian/roombox.postinst */

void token_fingerprint(const char *token, size_t len, char out[TOKEN_FINGERPRINT_LEN + 1])
{
	uint8_t h[32];

	sha256(token, len, h);
	for (int i = 0; i < TOKEN_FINGERPRINT_LEN / 2; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
}

/* The whole file, NUL-terminated; NULL with a message printed. */
static char *read_file(const char *path, struct stat *st)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	char *text;
	ssize_t n;

	if (fd < 0) {
		fprintf(stderr, "roomboxctl: tokens %s: %s\n", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode) || st->st_size > TOKENS_FILE_MAX) {
		fprintf(stderr, "roomboxctl: tokens %s: not a regular file of at most %u bytes\n",
			path, TOKENS_FILE_MAX);
		close(fd);
		return NULL;
	}
	text = malloc((size_t)st->st_size + 1);
	n = text ? pread(fd, text, (size_t)st->st_size, 0) : -1;
	close(fd);
	if (n < 0) {
		fprintf(stderr, "roomboxctl: tokens %s: read: %s\n", path, strerror(errno));
		free(text);
		return NULL;
	}
	text[n] = '\0';
	return text;
}

/* The token of one line (surrounding whitespace dropped, as auth.c does):
 * start and length; length 0 for a blank line. */
static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static const char *line_token(const char *line, size_t len, size_t *tlen)
{
	while (len && is_blank(*line)) {
		line++;
		len--;
	}
	while (len && is_blank(line[len - 1]))
		len--;
	*tlen = len;
	return line;
}

/* Lock the directory of path (serialises roomboxctl runs); fd or -1. */
static int lock_dir(const char *path)
{
	char *copy = strdup(path);
	int fd = copy ? open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;

	free(copy);
	if (fd < 0 || flock(fd, LOCK_EX) < 0) {
		fprintf(stderr, "roomboxctl: tokens %s: lock its directory: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Replace path's contents with text, keeping owner and mode; 0 or 1. */
static int replace_file(const char *path, const struct stat *st, const char *text, size_t len)
{
	char tmp[4096];
	int fd;

	snprintf(tmp, sizeof(tmp), "%s.roomboxctl-tmp", path);
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		fprintf(stderr, "roomboxctl: tokens %s: create %s: %s\n", path, tmp, strerror(errno));
		return 1;
	}
	if (fchown(fd, st->st_uid, st->st_gid) < 0 || fchmod(fd, st->st_mode & 07777) < 0 ||
	    write(fd, text, len) != (ssize_t)len || fsync(fd) < 0) {
		fprintf(stderr, "roomboxctl: tokens %s: write %s: %s\n", path, tmp, strerror(errno));
		close(fd);
		unlink(tmp);
		return 1;
	}
	close(fd);
	if (rename(tmp, path) < 0) {
		fprintf(stderr, "roomboxctl: tokens %s: rename: %s\n", path, strerror(errno));
		unlink(tmp);
		return 1;
	}
	return 0;
}

int tokens_new(const char *path)
{
	uint8_t raw[TOKEN_BYTES];
	char token[2 * TOKEN_BYTES + 2], fp[TOKEN_FINGERPRINT_LEN + 1], *text, *all;
	struct stat st;
	size_t len;
	int lock, rc = 1;

	if (getrandom(raw, sizeof(raw), 0) != sizeof(raw)) {
		fprintf(stderr, "roomboxctl: getrandom: %s\n", strerror(errno));
		return 1;
	}
	for (int i = 0; i < TOKEN_BYTES; i++)
		snprintf(token + 2 * i, 3, "%02x", raw[i]);
	lock = lock_dir(path);
	if (lock < 0)
		return 1;
	text = read_file(path, &st);
	if (text) {
		len = strlen(text);
		/* a last line without its newline gets one first */
		if (asprintf(&all, "%s%s%s\n", text, len && text[len - 1] != '\n' ? "\n" : "",
			     token) >= 0) {
			rc = replace_file(path, &st, all, strlen(all));
			free(all);
		}
		free(text);
	}
	close(lock);
	if (rc == 0) {
		token_fingerprint(token, strlen(token), fp);
		printf("%s\n", token);
		fprintf(stderr, "roomboxctl: token %s added to %s (shown this once)\n", fp, path);
	}
	return rc;
}

int tokens_list(const char *path)
{
	struct stat st;
	char fp[TOKEN_FINGERPRINT_LEN + 1], *text = read_file(path, &st), *p;

	if (!text)
		return 1;
	for (p = text; *p;) {
		size_t len = strcspn(p, "\n"), tlen;
		const char *tok = line_token(p, len, &tlen);

		if (tlen) {
			token_fingerprint(tok, tlen, fp);
			printf("%s\n", fp);
		}
		p += len + (p[len] == '\n');
	}
	free(text);
	return 0;
}

static bool is_hex(const char *s)
{
	return *s && strspn(s, "0123456789abcdefABCDEF") == strlen(s);
}

int tokens_revoke(const char *path, const char *want)
{
	char fp[TOKEN_FINGERPRINT_LEN + 1], *text, *out, *p;
	size_t want_len = strlen(want), used = 0, hits = 0, left = 0;
	char first_hit[TOKEN_FINGERPRINT_LEN + 1] = "";
	struct stat st;
	int lock, rc = 1;

	if (!is_hex(want) || want_len < 6 || want_len > TOKEN_FINGERPRINT_LEN) {
		fprintf(stderr, "roomboxctl: token revoke: '%s' is not a fingerprint "
			"(6 to %d hex digits, as `roomboxctl token list` shows)\n",
			want, TOKEN_FINGERPRINT_LEN);
		return 1;
	}
	lock = lock_dir(path);
	if (lock < 0)
		return 1;
	text = read_file(path, &st);
	out = text ? malloc(strlen(text) + 1) : NULL;
	if (!out)
		goto done;
	for (p = text; *p;) {
		size_t len = strcspn(p, "\n"), tlen;
		const char *tok = line_token(p, len, &tlen);
		bool drop = false;

		if (tlen) {
			token_fingerprint(tok, tlen, fp);
			drop = strncasecmp(fp, want, want_len) == 0;
			if (drop && first_hit[0] && strcmp(first_hit, fp) != 0) {
				fprintf(stderr, "roomboxctl: token revoke: %s names more than one "
					"token (%s, %s): give more digits\n", want, first_hit, fp);
				goto done;
			}
			if (drop) {
				snprintf(first_hit, sizeof(first_hit), "%s", fp);
				hits++;
			} else {
				left++;
			}
		}
		if (!drop) {
			memcpy(out + used, p, len);
			used += len;
			if (p[len] == '\n')
				out[used++] = '\n';
		}
		p += len + (p[len] == '\n');
	}
	if (!hits) {
		fprintf(stderr, "roomboxctl: token revoke: no token with fingerprint %s in %s\n",
			want, path);
		goto done;
	}
	rc = replace_file(path, &st, out, used);
	if (rc == 0) {
		printf("revoked %s\n", first_hit);
		if (!left)
			fprintf(stderr, "roomboxctl: warning: %s holds no token now: every API "
				"request is refused (401)\n", path);
	}
done:
	free(text);
	free(out);
	close(lock);
	return rc;
}

char *tokens_first(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char line[4096];

	if (!f) {
		snprintf(err, errlen, "tokens %s: %s%s", path, strerror(errno),
			 errno == EACCES ? " (run roomboxctl as root)" : "");
		return NULL;
	}
	while (fgets(line, sizeof(line), f)) {
		size_t tlen;
		const char *tok = line_token(line, strcspn(line, "\n"), &tlen);

		if (tlen) {
			fclose(f);
			return strndup(tok, tlen);
		}
	}
	fclose(f);
	snprintf(err, errlen, "tokens %s: holds no token (roomboxctl token new)", path);
	return NULL;
}
