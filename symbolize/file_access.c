/*
 * symbolize/file_access.c — the one place where files named by a result
 * (MAP records' binaries, the saved vdso, their debug files, perf maps) are
 * opened, and the rule for whose behalf they are read on.
 *
 * A result directory is untrusted input written by whoever owns it. When root
 * reports on a directory another user owns, a MAP record naming /etc/shadow
 * or a root-only binary must not make root read it for them (issue 18): such
 * files are read only when the directory's owner could read them. Two checks
 * enforce that while a file is opened:
 *  - the open itself runs with the owner's filesystem uid and gid
 *    (setfsuid/setfsgid: per thread, undone right after), so the kernel
 *    applies search permission on every directory of the path, and ACLs;
 *  - the opened descriptor's owner, group and mode are checked against the
 *    owner's uid and groups (from the passwd and group databases), because
 *    the kernel check above still sees root's supplementary groups (changing
 *    those is process-wide) and because it is the check that holds even if
 *    the fs-credential switch is refused (no CAP_SETUID in a container).
 * What remains open: a world-readable file in a directory only root's
 * supplementary groups may search is readable through the first check.
 * Otherwise (not root, or root's own results) files open as usual: the kernel
 * already stops a user from reading what they could not.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolize/symbolize_internal.h"

/* The reader whose rule applies to the next opens (set by the symbolizer at
 * each entry point that may open files); NULL: no restriction. */
static const struct file_reader *current;
static unsigned depth;
static uid_t saved_fsuid;
static gid_t saved_fsgid;

/* The kernel's default overflow gid ("nogroup"): the fs gid given to an owner
 * with no passwd entry, so that no real group's permissions apply. */
#define NO_GROUP ((gid_t)65534)

void file_reader_init(struct file_reader *r, const char *result_dir)
{
    *r = (struct file_reader){0};
    struct stat st;
    if (!result_dir || geteuid() != 0 || stat(result_dir, &st) != 0 || st.st_uid == 0)
        return;
    r->as_owner = true;
    r->uid = st.st_uid;
    r->gid = NO_GROUP;
    struct passwd pw, *pwp = NULL;
    char buf[4096];
    if (getpwuid_r(st.st_uid, &pw, buf, sizeof buf, &pwp) != 0 || !pwp)
        return; /* no groups: only the owner and "other" bits grant reading */
    r->gid = pw.pw_gid;
    int n = 32;
    for (int tries = 0; tries < 4; tries++) {
        gid_t *g = realloc(r->groups, (size_t)n * sizeof *g);
        if (!g)
            break; /* out of memory: fewer groups only refuses more */
        r->groups = g;
        int want = n;
        if (getgrouplist(pw.pw_name, pw.pw_gid, g, &want) >= 0) {
            r->ngroups = want;
            break;
        }
        n = want > n ? want : n * 2;
    }
}

void file_reader_free(struct file_reader *r)
{
    if (current == r)
        current = NULL;
    free(r->groups);
    r->groups = NULL;
    r->ngroups = 0;
}

void file_reader_use(const struct file_reader *r)
{
    current = r && r->as_owner ? r : NULL;
}

void file_access_enter(void)
{
    if (!current || depth++ > 0)
        return;
    saved_fsgid = (gid_t)setfsgid(current->gid);
    saved_fsuid = (uid_t)setfsuid(current->uid);
}

void file_access_leave(void)
{
    if (!current || depth == 0 || --depth > 0)
        return;
    setfsuid(saved_fsuid);
    setfsgid(saved_fsgid);
}

static bool owner_may_read(const struct file_reader *r, const struct stat *st)
{
    if (st->st_uid == r->uid)
        return st->st_mode & S_IRUSR;
    bool in_group = st->st_gid == r->gid && r->gid != NO_GROUP;
    for (int i = 0; i < r->ngroups && !in_group; i++)
        in_group = r->groups[i] == st->st_gid;
    if (in_group)
        return st->st_mode & S_IRGRP;
    return st->st_mode & S_IROTH;
}

/*
 * Paths come from result directories, which are untrusted: a MAP record may
 * name a FIFO (open would block for ever), a device (/dev/urandom never ends)
 * or a directory. O_NONBLOCK makes open return at once whatever the file is,
 * and only regular files are kept. -1 for anything else, errno EACCES when the
 * result's owner may not read the file.
 */
int sym_open_regular(const char *path, struct stat *st)
{
    file_access_enter();
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    int err = errno;
    file_access_leave();
    if (fd < 0) {
        errno = err;
        return -1;
    }
    struct stat tmp;
    if (!st)
        st = &tmp;
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        close(fd);
        errno = ENOENT;
        return -1;
    }
    if (current && !owner_may_read(current, st)) {
        close(fd);
        errno = EACCES;
        return -1;
    }
    return fd;
}
