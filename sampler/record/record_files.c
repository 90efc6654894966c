/*
 * sampler/record/record_files.c — creating the result directory and the
 * launcher's files in it, when the directory may be hostile (issue 18).
 *
 * opprof often runs as root, and `-o DIR` may name a directory someone else
 * prepared. So: an existing DIR must be a real directory (not a link, not a
 * dangling one), owned by the user opprof runs as, and empty; and every file
 * opprof creates in it is created with O_CREAT | O_EXCL | O_NOFOLLOW, so a
 * link planted under the name of one of our files makes the open fail instead
 * of writing through the link. info is rewritten by writing info.tmp that way
 * and renaming it over info (rename replaces a planted link, never follows it);
 * on a full disk, in place (rewrite_info_in_place says why).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sampler/record/record.h"

int record_check_existing_dir(const char *dir, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(dir, &st) != 0) {
        snprintf(err, errlen, "cannot use %s: %s", dir, strerror(errno));
        return -1;
    }
    if (S_ISLNK(st.st_mode)) {
        snprintf(err, errlen, "%s is a symbolic link%s: give -o a directory of your own (or a new name)", dir,
                 stat(dir, &st) != 0 ? " to nothing" : "");
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s exists and is not a directory: choose another -o DIR", dir);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        snprintf(err, errlen, "%s belongs to another user (uid %u): opprof writes only into a directory it creates "
                 "or one you own; choose another -o DIR", dir, (unsigned)st.st_uid);
        return -1;
    }
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "cannot read %s: %s", dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    bool empty = true;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            empty = false;
    closedir(d);
    if (!empty) {
        snprintf(err, errlen, "%s exists and is not empty: choose another -o DIR or remove it", dir);
        return -1;
    }
    return 0;
}

int record_create_file(const char *dir, const char *name, int flags)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return open(path, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
}

/* The info text is built in memory and then written out (record_end_info):
 * one launcher, one info at a time. */
static char *info_text;
static size_t info_len;

FILE *record_begin_info(const char *dir)
{
    (void)dir;
    free(info_text);
    info_text = NULL;
    info_len = 0;
    return open_memstream(&info_text, &info_len);
}

static bool write_all_fd(int fd, const char *text, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        off += (size_t)n;
    }
    return true;
}

/* info.tmp then rename: a reader never sees a half-written info. */
static int replace_info(const char *dir, const char *text, size_t len)
{
    char tmp[4096], path[4096];
    if (snprintf(tmp, sizeof tmp, "%s/" OPR_INFO_FILE ".tmp", dir) >= (int)sizeof tmp ||
        snprintf(path, sizeof path, "%s/" OPR_INFO_FILE, dir) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* Ours from an interrupted rewrite, or planted: either way it goes (a
     * link is removed, not followed), and O_EXCL below fails if one is
     * planted again in between. */
    unlink(tmp);
    int fd = record_create_file(dir, OPR_INFO_FILE ".tmp", O_WRONLY);
    if (fd < 0)
        return -1;
    bool ok = write_all_fd(fd, text, len);
    int err = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (!ok || rename(tmp, path) != 0) {
        err = ok ? errno : err;
        unlink(tmp); /* never leave a 0-byte info.tmp behind */
        errno = err;
        return -1;
    }
    return 0;
}

/* Disk full (issue 18, item 6): info.tmp needs a new block the disk does not
 * have, but the info written before the workload started already owns one,
 * and the final text (well under a 4 KB block) fits in it. So the existing
 * info is rewritten in place: opened without following a link, checked to
 * be our own regular file, written from offset 0 and cut to length. A reader
 * racing this rewrite could see a mix, but by then the workload has ended. */
static int rewrite_info_in_place(const char *dir, const char *text, size_t len)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/" OPR_INFO_FILE, dir) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
    if (!ok)
        errno = EPERM;
    ok = ok && write_all_fd(fd, text, len) && ftruncate(fd, (off_t)len) == 0;
    int err = errno;
    close(fd);
    errno = err;
    return ok ? 0 : -1;
}

int record_end_info(const char *dir, FILE *f)
{
    bool ok = !ferror(f);
    if (fclose(f) != 0 || !info_text)
        ok = false;
    if (!ok) {
        errno = ENOMEM;
        return -1;
    }
    int rc = replace_info(dir, info_text, info_len);
    if (rc != 0 && (errno == ENOSPC || errno == EDQUOT)) {
        int err = errno;
        rc = rewrite_info_in_place(dir, info_text, info_len);
        if (rc != 0)
            errno = err;
    }
    free(info_text);
    info_text = NULL;
    info_len = 0;
    return rc;
}
