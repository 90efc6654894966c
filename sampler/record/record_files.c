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
 * and renaming it over info (rename replaces a planted link, never follows it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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

FILE *record_begin_info(const char *dir)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s/" OPR_INFO_FILE ".tmp", dir) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    /* Ours from an interrupted rewrite, or planted: either way it goes (a
     * link is removed, not followed), and O_EXCL below fails if one is
     * planted again in between. */
    unlink(tmp);
    int fd = record_create_file(dir, OPR_INFO_FILE ".tmp", O_WRONLY);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f && fd >= 0)
        close(fd);
    return f;
}

int record_end_info(const char *dir, FILE *f)
{
    char tmp[4096], path[4096];
    snprintf(tmp, sizeof tmp, "%s/" OPR_INFO_FILE ".tmp", dir);
    snprintf(path, sizeof path, "%s/" OPR_INFO_FILE, dir);
    bool ok = !ferror(f);
    if (fclose(f) != 0)
        ok = false;
    if (!ok) {
        unlink(tmp);
        return -1;
    }
    return rename(tmp, path);
}
